# The S3 backend tests use the same moto server and AWS environment as the engine tests (one server per session).
from tests.engines.aws.conftest import aws, moto_server  # noqa: F401
