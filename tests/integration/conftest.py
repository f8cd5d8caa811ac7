# The GitOps test on owned hosts keeps its state in S3: the same moto server and AWS environment as the engine tests
# (one server per session).
from tests.engines.aws.conftest import aws, moto_server  # noqa: F401
