"""``bertkit serve``: a model behind text-embeddings-inference's HTTP API, continuously batched.

* :mod:`bertkit.serve.config` -- :class:`ServeConfig`, the one configuration of a server;
* :mod:`bertkit.serve.batcher` -- :class:`ContinuousBatcher`: the model runs whenever rows
  wait; rows that arrive meanwhile share the next length-sorted batch under a token budget;
  a bounded queue (full -> 429, never fits -> 413);
* :mod:`bertkit.serve.app` -- the FastAPI application and the logic of every route;
* :mod:`bertkit.serve.inputs` / :mod:`~bertkit.serve.schemas` / :mod:`~bertkit.serve.errors`
  -- TEI's request grammar, bodies and error kinds; :mod:`~bertkit.serve.gate` -- API key,
  CORS, payload limit, ``/docs`` offline; :mod:`~bertkit.serve.metrics` -- ``/metrics``.

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
