"""Request and answer bodies of ``bertkit serve`` (pydantic), field for field text-embeddings-inference's
(``router/src/http/types.rs``) where TEI has the route; bertkit's extra fields are marked
"bertkit". Unknown fields are ignored, as TEI ignores them (serde), and named in the answer's
``X-Bertkit-Ignored`` header (:func:`ignored_fields`), as are the Hugging Face ``parameters``
the model's task does not take.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

Direction = Literal["left", "right", "Left", "Right"]

# bertkit's answer headers (the routes set them, the schemas' descriptions name them)
TRUNCATED_HEADER = "X-Bertkit-Truncated"
WINDOWS_HEADER = "X-Bertkit-Windows"
IGNORED_HEADER = "X-Bertkit-Ignored"  # request fields and parameters given but not applied


def _whole(value: Any) -> Any:
    """A float with no fraction as the integer it equals (JSON does not tell 2.0 from 2)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# request integers: 2 or 2.0 (one number in JSON), never `true` or "2" (strict models)
JsonInt = Annotated[int, BeforeValidator(_whole)]
Count = Annotated[int, Field(ge=1), BeforeValidator(_whole)]  # the bound first: it reaches the schema


class _Body(BaseModel):
    # unknown fields kept in model_extra, to be named as ignored; strict: `0` is not `false`,
    # "1" not 1, as the OpenAPI description says
    model_config = ConfigDict(extra="allow", strict=True)


def ignored_fields(body: BaseModel, prefix: str = "") -> list[str]:
    """The unknown fields of a request body, nested ones as ``parameters.stride``; each name
    JSON-escaped to ASCII (it goes into a header)."""
    names = [prefix + json.dumps(name)[1:-1] for name in body.model_extra or {}]
    for name in type(body).model_fields:
        value = getattr(body, name)
        if isinstance(value, BaseModel):
            names += ignored_fields(value, f"{prefix}{name}.")
    return names


class _Truncation(_Body):
    truncate: bool | None = Field(None, description="truncate over-long inputs (default: the "
                                                    "server's --truncate, TEI's --auto-truncate)")
    truncation_direction: Direction = Field("right", description="which end loses tokens")


class HFParameters(_Body):
    """The Hugging Face inference API's ``parameters`` (sent by ``InferenceClient``); each is
    honoured by the tasks named, and ignored (named in ``X-Bertkit-Ignored``) by the others."""

    top_k: Count | None = Field(None, description="classification: the best k labels; "
                                                            "question answering: k answers, best first")
    function_to_apply: Literal["softmax", "sigmoid", "none"] | None = Field(
        None, description="classification: none = raw scores (TEI's raw_scores)")
    aggregation_strategy: Literal["none", "simple", "first"] | None = Field(
        None, description="token classification: none = one entity per word; simple or first "
                          "(the same: a word is tagged by its first wordpiece) = B-/I- runs "
                          "grouped (the default)")
    ignore_labels: list[str] | None = Field(None, description="token classification: tags or "
                                                              "entity groups left out (default [\"O\"])")
    handle_impossible_answer: bool | None = Field(
        None, description="question answering: whether \"\" may be answered (default: a SQuAD 2.0 "
                          "model at its saved threshold, no for others)")
    max_answer_len: Count | None = Field(None, description="question answering: the "
                                                                      "longest answer, in tokens")


class PredictRequest(_Truncation):
    inputs: Any = Field(..., description="a text, a pair [A, B], or a batch [[A], [A, B], ...]; "
                                         "bertkit: {question, context} / {context, choices} or a list",
                        examples=["What is Deep Learning?", [["I like you."], ["I love you.", "Me too."]]])
    raw_scores: bool = Field(False, description="logits instead of softmax (sigmoid for one label)")
    parameters: HFParameters | None = Field(None, description="Hugging Face inference API parameters")


class RerankRequest(_Truncation):
    query: str = Field(..., examples=["What is Deep Learning?"])
    texts: list[str] = Field(..., examples=[["Deep Learning is ..."]])
    raw_scores: bool = False
    return_text: bool = False


PROMPT_NAME = ("a key of the model's sentence-transformers prompts: that prompt is put before every "
               "text (default: its default_prompt_name's, else none)")


class EmbedRequest(_Truncation):
    inputs: Any = Field(..., description="a text, token ids, or a list of those",
                        examples=["What is Deep Learning?"])
    prompt_name: str | None = Field(None, description=PROMPT_NAME)
    normalize: bool = Field(True, description="scale each vector to unit length")
    dimensions: JsonInt | None = Field(None, description="keep the first N dimensions (then normalise)")
    pooling: Literal["cls", "mean", "max"] | None = Field(None, description="bertkit: cls, mean or max (default: the "
                                                                     "model's sentence-transformers pooling, else cls)")
    layers: list[JsonInt] | None = Field(None, description="bertkit: hidden states to concatenate "
                                                       "(default [-1], the last layer)")


class EmbedAllRequest(_Truncation):
    inputs: Any = Field(..., examples=["What is Deep Learning?"])
    prompt_name: str | None = None


class EmbedSparseRequest(_Truncation):
    inputs: Any = Field(..., description="a text, token ids, or a list of those",
                        examples=["What is Deep Learning?"])
    prompt_name: str | None = Field(None, description=PROMPT_NAME)


class SparseValue(BaseModel):
    index: int = Field(..., description="the term's token id")
    value: float = Field(..., description="its SPLADE weight, max over tokens of log(1 + relu(logit))")


class OpenAIRequest(_Body):
    input: Any = Field(..., examples=["What is Deep Learning?"])
    model: str | None = None
    user: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: JsonInt | None = None


class SimilarityInput(_Body):
    source_sentence: str
    sentences: list[str]


class SimilarityParameters(_Truncation):
    prompt_name: str | None = None


class SimilarityRequest(_Body):
    inputs: SimilarityInput
    parameters: SimilarityParameters | None = None


class TokenizeRequest(_Body):
    inputs: str | list[str] = Field(..., examples=["test"])
    add_special_tokens: bool = True
    prompt_name: str | None = None


class DecodeRequest(_Body):
    ids: list[JsonInt] | list[list[JsonInt]] = Field(..., examples=[[101, 3231, 102]])
    skip_special_tokens: bool = True


class FillMaskParameters(_Body):
    """``InferenceClient.fill_mask``'s ``parameters`` (``targets`` is not supported: ignored)."""

    top_k: JsonInt | None = Field(None, description="candidates per [MASK] (1-100)")


class FillMaskRequest(_Truncation):
    inputs: Any = Field(..., description="a text with [MASK] tokens, or a list of texts",
                        examples=["the man went to the [MASK] ."])
    top_k: JsonInt = Field(5, description="candidates per [MASK] (1-100)")
    parameters: FillMaskParameters | None = Field(None, description="Hugging Face inference API "
                                                                    "parameters (top_k wins over the field)")


class AttentionRequest(_Body):
    inputs: str = Field(..., description="one text (the first of a pair, or the question of QA)")
    pair: str | None = Field(None, description="the second text (or the QA context)")
    layer: JsonInt = Field(-1, description="encoder layer (negative counts from the last)")
    head: JsonInt = Field(0, description="attention head")
    truncate: bool | None = Field(None, description="map the first tokens of an over-long text, and "
                                                    "say so in X-Bertkit-Truncated (default: the "
                                                    "server's --truncate); false: answer 413")


# ---------------------------------------------------------------------- answers (for /docs)
class ErrorResponse(BaseModel):
    error: str = Field(..., examples=["Model is overloaded"])
    error_type: str = Field(..., examples=["Overloaded"])


class OpenAIErrorResponse(BaseModel):
    message: str
    code: int
    type: str


class Prediction(BaseModel):
    score: float
    label: str


class Rank(BaseModel):
    index: int
    text: str | None = None
    score: float


class SimpleToken(BaseModel):
    id: int
    text: str
    special: bool
    start: int | None
    stop: int | None


class OpenAIEmbedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    embedding: list[float] | str
    index: int


class OpenAIUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class OpenAIResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[OpenAIEmbedding]
    model: str
    usage: OpenAIUsage


class Info(BaseModel):
    model_id: str
    model_sha: str | None
    model_dtype: str
    served_model_name: str
    model_type: dict[str, Any] = Field(..., examples=[{"classifier": {"id2label": {"0": "negative"},
                                                                      "label2id": {"negative": 0}}}])
    max_concurrent_requests: int
    max_input_length: int
    max_batch_tokens: int
    max_batch_requests: int | None
    max_client_batch_size: int
    auto_truncate: bool
    tokenization_workers: int
    version: str
    sha: str | None = None
    docker_label: str | None = None
    bertkit: dict[str, Any] = Field(..., description="bertkit: task, labels, precision, layers, "
                                                     "heads, long-text mode, batches run")


PREDICT_ANSWER = list[Prediction] | list[list[Prediction]] | Any
