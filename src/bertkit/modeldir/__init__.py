"""Model directories beyond the float checkpoint (:mod:`bertkit.checkpoint`): INT8 weights
(:mod:`~bertkit.modeldir.int8`), the fine-tuning entry saved in ``config.json`` and its token
limit rule (:mod:`~bertkit.modeldir.entry`), the finished / trained-head checks
(:mod:`~bertkit.modeldir.marker`) and the sentence-transformers layout
(:mod:`~bertkit.modeldir.st_layout`). Below the task families, fine-tuning and inference,
which all read them."""
