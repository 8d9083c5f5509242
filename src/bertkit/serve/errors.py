"""Every error ``bertkit serve`` answers: ``{"error": message, "error_type": kind}`` with a 4xx/5xx.

The kinds are text-embeddings-inference's (``ErrorType`` in its ``router/src/lib.rs``, which
serialises the variant names): ``Empty`` 400, ``Validation`` 422 (413 when the request can never
fit: too many inputs, a text too long with truncation off, more rows than the queue holds),
``Tokenizer`` 422, ``Backend`` 424 (the model cannot serve this route), ``Overloaded`` 429
(with ``Retry-After``), ``Unhealthy`` 503. TEI answers 401, 404, 405, 413 (body too large) and
415 with an empty or plain-text body; bertkit gives them the same JSON shape with the kinds
``Unauthorized``, ``NotFound``, ``MethodNotAllowed``, ``PayloadTooLarge`` and
``UnsupportedMediaType``; the connection limits (:mod:`bertkit.serve.connections`) answer 408
``RequestTimeout``, 431 ``HeaderTooLarge`` and 503 ``Overloaded``. The OpenAI route (``/v1/embeddings``) answers errors as TEI's
``OpenAICompatErrorResponse``: ``{"message", "code", "type"}``.
"""

from __future__ import annotations

from bertkit.errors import InputError

STATUS_OF = {"Empty": 400, "Validation": 422, "Tokenizer": 422, "Backend": 424, "Overloaded": 429,
             "Unhealthy": 503, "Unauthorized": 401, "NotFound": 404, "MethodNotAllowed": 405,
             "PayloadTooLarge": 413, "UnsupportedMediaType": 415, "RequestTimeout": 408,
             "HeaderTooLarge": 431}
OPENAI_PATHS = ("/v1/embeddings", "/embeddings")


TEI_ERR_BY_KIND = object()  # ApiError's tei_err when TEI's err label follows from its kind


class ApiError(Exception):
    """An error answer: ``status``, ``message`` and TEI's ``error_type``; ``tei_err`` the
    ``err`` label TEI's ``te_request_failure`` counts it under where its kind does not say it
    (``None``: TEI counts no failure for it; :func:`bertkit.serve.metrics.tei_err`)."""

    def __init__(self, message: str, error_type: str = "Validation", status: int | None = None,
                 headers: dict | None = None, tei_err: str | None | object = TEI_ERR_BY_KIND):
        super().__init__(message)
        self.error_type = error_type
        self.status = status or STATUS_OF[error_type]
        self.headers = headers
        self.tei_err = tei_err

    def body(self, path: str = "") -> dict:
        """The JSON body (OpenAI's shape on the OpenAI route)."""
        if path in OPENAI_PATHS:
            return {"message": str(self), "code": self.status, "type": self.error_type}
        return {"error": str(self), "error_type": self.error_type}


def from_input_error(error: InputError, where: str = "") -> ApiError:
    """The engine's :class:`InputError` in the server's vocabulary, by its kind: ``too_long``
    413 (``Validation``), ``unsupported`` (this model cannot do it) ``Backend`` 424 as TEI,
    ``invalid`` 422 ``Validation``; ``where`` (``inputs[2]: ``) names the item of a batch."""
    message = f"{where}{error}"
    if error.kind == "too_long":
        return ApiError(message, "Validation", 413)
    if error.kind == "unsupported":
        return ApiError(message, "Backend")
    return ApiError(message, "Validation")
