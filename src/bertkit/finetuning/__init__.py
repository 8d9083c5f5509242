"""What is done with a task: fine-tuning and the jobs built on it.

:mod:`~bertkit.finetuning.loop` (the one fine-tuning loop and its grid),
:mod:`~bertkit.finetuning.evaluate` (scoring a task's evaluation splits),
:mod:`~bertkit.finetuning.config` (``FinetuneConfig``, ``PruneConfig``, ``DistillConfig``),
:mod:`~bertkit.finetuning.run_dir` (the run's output directory: never torn, resumable),
:mod:`~bertkit.finetuning.distill`, :mod:`~bertkit.finetuning.prune` and
:mod:`~bertkit.finetuning.downstream` (the GLUE grid of a pre-trained model). What a task *is*
(readers, features, decoders) is :mod:`bertkit.tasks`'; the model directories every job
reads and writes are :mod:`bertkit.modeldir`'s. Nothing here is imported by the inference
engine.
"""
