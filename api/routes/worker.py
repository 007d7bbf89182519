"""Worker endpoints; every request is signed with the worker's Ed25519 key (api/worker_auth)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, HTTPException, Request, Response, status

from api.deps import (
    ConfigDep,
    CurrentProvider,
    NowDep,
    SessionDep,
    SignedWorkerKey,
    get_chain_context,
    get_deployment,
)
from api.errors import ApiError, BadRequest
from api.models import Job, Lease, Provider, User
from api.routes.balances import sources_of
from api.routes.worker_io import BlobStoreDep
from api.schemas.earnings import EarningsPublic
from api.schemas.lease import (
    ClaimPublic,
    ClaimRequest,
    DeliveriesPublic,
    LeaseComplete,
    LeaseDeliveries,
    LeaseEnd,
    LeaseHeartbeat,
    LeasePublic,
    LeaseRelease,
)
from api.schemas.provider import (
    HeartbeatPublic,
    ProviderPublic,
    RateCardUpdate,
    RatePublic,
    TelemetryUpdate,
    WorkerChallengePublic,
)
from api.schemas.rate_card import RateCardSetPublic
from api.services import auth as auth_service
from api.services import bonds, job_faults, leases, payable_escrow
from api.services import earnings as earnings_service
from api.services import providers as service
from api.services.escrow_tx import EscrowUnavailable
from api.services.leases import ActiveLease, ClaimedLease
from api.services.rate_cards import document_of
from chain.offchain.builders.bond import Bond
from chain.offchain.escrow_terms import escrow_refusal
from proofnet.messages.claim import ClaimEscrow, ClaimSealing
from proofnet.messages.registration import ProviderRegistration

router = APIRouter(prefix="/worker", tags=["worker"])


@router.post("/challenge")
def registration_challenge(
    worker_key: SignedWorkerKey, session: SessionDep, config: ConfigDep, now: NowDep
) -> WorkerChallengePublic:
    """A single-use nonce for the payout binding the worker signs to register."""
    issued = auth_service.issue_worker_challenge(session, config, worker_key, now)
    return WorkerChallengePublic(
        nonce=issued.nonce, network=config.network, expires_at=issued.expires_at
    )


@router.post("/register")
def register(
    body: ProviderRegistration,
    worker_key: SignedWorkerKey,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> ProviderPublic:
    """Register with a payout binding over a nonce from /worker/challenge (re-registering
    replaces the payout address, GPUs and capabilities)."""
    if body.binding is None:
        raise BadRequest("registration needs a payout binding (binding was null)")
    provider = service.register(
        session,
        config,
        worker_key=worker_key,
        binding=body.binding,
        gpus=service.offers_from_registration(body),
        capabilities=body.capabilities.model_dump(mode="json"),
        now=now,
    )
    view = next(
        v
        for v in service.list_providers(session, config, now, online_only=False)
        if v.provider.id == provider.id
    )
    return ProviderPublic.of(view)


@router.post("/heartbeat")
def heartbeat(provider: CurrentProvider, session: SessionDep, now: NowDep) -> HeartbeatPublic:
    service.heartbeat(session, provider, now)
    return HeartbeatPublic(server_time=now)


@router.get("/earnings")
def earnings(
    provider: CurrentProvider, session: SessionDep, config: ConfigDep, request: Request
) -> EarningsPublic:
    """What this worker's payout address earned on chain (as the chain watcher recorded
    it), what is pending settlement, and the latest payouts with their transactions."""
    sources = sources_of(request.app.state)
    return EarningsPublic.of(
        earnings_service.provider_earnings(session, sources, provider, network=config.network)
    )


@router.put("/telemetry")
def telemetry(
    body: TelemetryUpdate, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> HeartbeatPublic:
    service.record_telemetry(session, provider, body.snapshot, now)
    return HeartbeatPublic(server_time=now)


@router.put("/rate-card")
def rate_card(
    body: RateCardUpdate,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> RateCardSetPublic:
    """Replace this provider's rates and publish them as its current rate card document;
    `digest` is what a spec's `pricing.rate_card` names to buy at these prices."""
    done = service.set_rate_card(session, config, provider, dict(body.rates), now)
    card = done.published
    return RateCardSetPublic(
        digest=None if card is None else card.digest,
        document=None if card is None else document_of(card),
        rates=[RatePublic.model_validate(c) for c in done.rates],
    )


@router.post(
    "/claim",
    responses={204: {"description": "no queued job fits this worker now"}},
    response_model=ClaimPublic,
)
def claim(
    request: Request,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
    store: BlobStoreDep,
    body: ClaimRequest | None = None,
) -> ClaimPublic | Response:
    """Lease the oldest queued job, or unit of a job with a topology, this worker's GPUs fit
    and it can run (`accepts`: cluster nodes, and jobs that ask for network egress, only to a
    worker that accepts them). A served
    API hands a lease out only once the job's escrow, read on chain now, can still pay it
    (`api.services.payable_escrow`); a job whose escrow cannot is taken back and the next
    one tried."""
    accepts = (body or ClaimRequest()).accepts
    leases.sweep_expired(session, now, config=config)
    service.heartbeat(session, provider, now)
    provider_bonds = _provider_bonds(request, session, config, provider)
    bonded = bonds.bonded_total(provider_bonds) if provider_bonds else 0
    for _ in range(_CLAIM_TRIES):
        claimed = leases.claim(
            session,
            config,
            provider,
            now,
            accepts_cluster=accepts.cluster,
            accepts_egress=accepts.egress,
            bonded_ntx=bonded,
            store=store,
        )
        if claimed is None:
            break
        refusal = bonds.bond_refusal(provider_bonds, claimed.job)
        if refusal is not None:
            leases.end_unstarted(session, claimed, refusal, now, escrow_refused=False)
            continue
        if not config.claim_requires_escrow:
            break
        if _escrow_pays_at_start(request, session, config, claimed, now):
            break
    else:
        claimed = None
    if claimed is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    recorded = leases.escrow_of(session, claimed.job)
    escrow = None
    if recorded is not None:
        from api.routes.oracle_feed import escrow_script_hash

        escrow = ClaimEscrow(
            network=config.network,
            script_hash=escrow_script_hash(),
            tx_id=recorded.tx_id,
            index=recorded.output_index,
        )
    return ClaimPublic(
        job_id=claimed.job.job_id,
        spec=claimed.job.spec,
        lease_token=claimed.token,
        nonce=claimed.lease.nonce,
        attempt=claimed.lease.attempt,
        expires_at=claimed.lease.expires_at,
        lease_ttl_s=config.lease_ttl_s,
        escrow=escrow,
        sealing=_claim_sealing(session, claimed.job),
        unit=claimed.unit,
        resume=claimed.resume,
    )


# Jobs whose escrow is refused at lease start are taken back; a claim tries this many.
_CLAIM_TRIES = 3


def _escrow_pays_at_start(
    request: Request, session: SessionDep, config: ConfigDep, claimed: ClaimedLease, now: datetime
) -> bool:
    """Whether the claimed job's escrow can still pay this lease's run, read on chain now;
    if not (or if the chain cannot be read), the lease is taken back before the worker
    hears of it (`leases.end_unstarted`)."""
    recorded = leases.escrow_of(session, claimed.job)
    owner = session.get(User, claimed.job.owner_id)
    try:
        if recorded is None or owner is None:
            raise EscrowUnavailable("the job has no recorded escrow")
        deployment = get_deployment(request)
        context = get_chain_context(request)
        found = payable_escrow.lookup(context, recorded.tx_id, recorded.output_index)
    except (ApiError, HTTPException, payable_escrow.EscrowBackendError) as exc:
        why = getattr(exc, "detail", None) or str(exc)
        leases.end_unstarted(
            session, claimed, f"its escrow could not be checked: {why}", now, escrow_refused=False
        )
        raise EscrowUnavailable(f"the job's escrow could not be checked on chain: {why}") from exc
    terms = payable_escrow.terms_for(claimed.job, owner, deployment, config, now, whole_job=False)
    refusal = escrow_refusal(found, terms)
    if refusal is None:
        return True
    leases.end_unstarted(
        session, claimed, f"{refusal.reason}: {refusal.message}", now, escrow_refused=True
    )
    return False


def _provider_bonds(
    request: Request, session: SessionDep, config: ConfigDep, provider: Provider
) -> list[Bond] | None:
    """The provider's bonds, read on chain now, when a queued job requires a bond (None
    when none does, or when they cannot be read: such jobs are then not handed out)."""
    if not leases.bond_required(session):
        return None
    try:
        return bonds.provider_bonds(
            get_chain_context(request),
            get_deployment(request),
            bonds.terms_of(config),
            provider.worker_key,
        )
    except (bonds.BondUnavailable, HTTPException):
        return None


def _claim_sealing(session: SessionDep, job: Job) -> ClaimSealing | None:
    from api.services.sealing_keys import sealing_key_for_job

    row = sealing_key_for_job(session, job)
    if row is None:
        return None
    return ClaimSealing(public_key=row.public_key, signature=row.signature, cose_key=row.cose_key)


def _lease_public(active: ActiveLease) -> LeasePublic:
    lease: Lease = active.lease
    return LeasePublic(
        job_id=active.job.job_id,
        status=active.job.status,
        expires_at=lease.expires_at,
        outcome=lease.outcome,
        cluster=active.cluster,
        stop=job_faults.lease_stop(lease),
    )


@router.post("/leases/{token}/heartbeat")
def lease_heartbeat(
    token: str,
    body: LeaseHeartbeat,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> LeasePublic:
    active = leases.heartbeat(
        session,
        config,
        provider,
        token,
        progress=body.progress,
        message=body.message,
        now=now,
        rendezvous=body.rendezvous,
    )
    return _lease_public(active)


@router.post("/leases/{token}/complete")
def lease_complete(
    token: str, body: LeaseComplete, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> LeasePublic:
    return _lease_public(leases.complete(session, provider, token, result=body.result, now=now))


@router.post("/leases/{token}/deliveries")
def lease_deliveries(
    token: str, body: LeaseDeliveries, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> DeliveriesPublic:
    pending = leases.report_deliveries(session, provider, token, body.reports, now)
    return DeliveriesPublic(pending=pending)


@router.post("/leases/{token}/release")
def lease_release(
    token: str, body: LeaseRelease, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> LeasePublic:
    return _lease_public(leases.release(session, provider, token, reason=body.reason, now=now))


@router.post("/leases/{token}/fail")
def lease_fail(
    token: str, body: LeaseEnd, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> LeasePublic:
    return _lease_public(leases.fail(session, provider, token, reason=body.reason, now=now))
