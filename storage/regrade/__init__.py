"""What every feature shares of regrade jobs: their tables and their life in the queue.

``lifecycle`` is what happens in the queue's transactions (held back, started, item
completed, promoted, ended); ``carry`` how human overrides follow a regrade;
``progress`` a job's figures; ``batch_answers`` the replies a batch engine got, from
which a worker answers an item. Creating, reading and changing jobs, and the batch
engines' phases, are the regrade feature's (:mod:`api.regrade`).
"""
