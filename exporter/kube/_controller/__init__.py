"""The fleet controller: one leader (a coordination.k8s.io Lease) keeps what schedulers read current.

Layers, each importing only those below: ``_controller`` (the composition: leader election, informers, the work
queue, the reconcile) above ``_lease`` (leader election), ``_informer`` (list once, then watch), ``_sync`` (desired
vs actual, the minimal writes), ``_queue`` (one coalesced sync at a time) and ``_limit`` (the syncs' writes
spread by a token bucket). What is wanted is
``_fleet._wanted``'s, the same code ``topolink cluster`` runs.
"""
