"""Every API table; importing this package registers them all on `api_registry.metadata`."""

from api.models.approval import Application, Endorsement
from api.models.auction import Auction, AuctionBid
from api.models.auth import ApiToken, AuthChallenge, WorkerRequestNonce
from api.models.base import TableBase, api_registry
from api.models.chain_movement import ChainMovement, ChainWatchCursor, ChainWatchPoint
from api.models.dispute_unit import DisputeUnit
from api.models.job import Job, Lease
from api.models.job_delivery import JobDelivery
from api.models.job_escrow import JobEscrow
from api.models.job_fault_vote import JobFaultVote
from api.models.job_outputs import JobLogLine, JobResult, LeaseUsage
from api.models.job_unit import JobUnit
from api.models.measurement import MeasuredRun
from api.models.notification import NotificationDelivery, NotificationSubscription
from api.models.proof_key_request import ProofKeyRequest
from api.models.provider import GpuChallenge, Provider, ProviderGpu, RateCard
from api.models.rate_card_document import JobRateCard, ProviderRateCard, PublishedRateCard
from api.models.result_verdict import ResultVerdict
from api.models.sealing_key import SealingKey
from api.models.storage_offer import StorageOffer, StoragePlacement
from api.models.user import User
from api.models.verification_unit import VerificationUnit

metadata = api_registry.metadata

__all__ = [
    "Auction",
    "AuctionBid",
    "ApiToken",
    "Application",
    "AuthChallenge",
    "ChainMovement",
    "ChainWatchCursor",
    "ChainWatchPoint",
    "DisputeUnit",
    "Endorsement",
    "GpuChallenge",
    "Job",
    "JobDelivery",
    "JobEscrow",
    "JobFaultVote",
    "JobLogLine",
    "JobRateCard",
    "JobResult",
    "JobUnit",
    "Lease",
    "LeaseUsage",
    "MeasuredRun",
    "NotificationDelivery",
    "NotificationSubscription",
    "ProofKeyRequest",
    "Provider",
    "ProviderGpu",
    "ProviderRateCard",
    "PublishedRateCard",
    "RateCard",
    "ResultVerdict",
    "SealingKey",
    "StorageOffer",
    "StoragePlacement",
    "TableBase",
    "User",
    "VerificationUnit",
    "WorkerRequestNonce",
    "api_registry",
    "metadata",
]
