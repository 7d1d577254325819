# SPDX-License-Identifier: BSD-3-Clause
"""torch datasets and transforms made native: what the C++ workers can run
instead of Python code. Runs in the trainer, when a DataLoader is built
(and when a transform is made or unpickled).

- ``datasets``: torchvision datasets and TensorDatasets -> native datasets.
- ``rows``: TensorDataset rows in a sealed memfd the C++ workers read.
- ``sample_views``: list views of a native sample table (``samples``,
  ``targets``).
- ``convert_autoaugment``, ``convert_v2``: torchvision's AutoAugment family
  and transforms.v2 -> native ops.
- ``convert_timm``: timm's create_transform ops -> native ops, timm's
  ImageDataset over a folder -> native files (timm is never imported).

May import: ``ringloader._ringloader``, ``ringloader._exceptions``,
``ringloader._slots`` (tensor rows), the public ``transforms`` (the ops it
converts to) and each other. Never ``ringloader._trainer`` or
``ringloader._workers`` (python/tests/test_import_graph.py checks the
direction)."""
