"""HTTP routes, thin over `api.services`; all under /api/v1."""

from fastapi import APIRouter

from api.routes import (
    approvals,
    auctions,
    auth,
    balances,
    bundles,
    deployment,
    disputes,
    escrow_cancel,
    escrow_refund,
    escrow_state,
    escrow_tx,
    estimates,
    gpu_challenges,
    health,
    jobs,
    notifications,
    oracle_feed,
    proof_keys,
    providers,
    rate_cards,
    result_release,
    resume_grants,
    sealing_keys,
    storage,
    users,
    verifications,
    worker,
    worker_io,
)

api_router = APIRouter(prefix="/api/v1")
api_router.include_router(health.router)
api_router.include_router(deployment.router)
api_router.include_router(bundles.router)
api_router.include_router(auth.router)
api_router.include_router(users.router)
api_router.include_router(approvals.router)
api_router.include_router(jobs.router)
api_router.include_router(resume_grants.router)
api_router.include_router(estimates.router)
api_router.include_router(notifications.router)
api_router.include_router(balances.router)
api_router.include_router(providers.router)
api_router.include_router(rate_cards.router)
api_router.include_router(storage.router)
api_router.include_router(storage.oracle_router)
api_router.include_router(worker.router)
api_router.include_router(gpu_challenges.router)
api_router.include_router(auctions.router)
api_router.include_router(worker_io.router)
api_router.include_router(oracle_feed.router)
api_router.include_router(proof_keys.router)
api_router.include_router(verifications.router)
api_router.include_router(result_release.router)
api_router.include_router(disputes.router)
api_router.include_router(escrow_tx.router)
api_router.include_router(sealing_keys.router)
api_router.include_router(escrow_refund.router)
api_router.include_router(escrow_cancel.router)
api_router.include_router(escrow_state.router)
