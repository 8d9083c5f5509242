"""``bertkit serve``: a fine-tuned model behind an HTTP API with dynamic batching.

* :mod:`bertkit.serve.config` -- :class:`ServeConfig`, the one configuration of a server;
* :mod:`bertkit.serve.batcher` -- :class:`DynamicBatcher`: rows of concurrent requests gathered
  into length-sorted batches under a token budget, a bounded queue (full -> 503);
* :mod:`bertkit.serve.app` -- the FastAPI application: ``/predict``, ``/embed``,
  ``/fill-mask``, ``/attention``, ``/health``, ``/info``, the page at ``/`` and ``/docs``.

Tokenisation, heads' post-processing and precision are :mod:`bertkit.inference`'s (the same
code as the Python API and the CLI); this package only queues, batches and speaks HTTP.
See docs/serving.md.
"""

from bertkit.serve.config import ServeConfig

__all__ = ["ServeConfig", "create_app"]


def create_app(config: ServeConfig, bert=None):
    """The ASGI application (imports FastAPI on first use)."""
    from bertkit.serve.app import create_app as create

    return create(config, bert)
