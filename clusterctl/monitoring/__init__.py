"""Monitoring (Prometheus, exporters, alert rules, Grafana dashboards) and `clusterctl check` acceptance tests.

Nothing heavy loads with the package (the CLI imports clusterctl.monitoring.commands at startup)."""

__all__ = ["render_monitoring"]


def __getattr__(name):
    if name == "render_monitoring":
        from clusterctl.monitoring.render import render_monitoring

        return render_monitoring
    raise AttributeError(name)
