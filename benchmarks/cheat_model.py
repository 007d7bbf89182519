"""The cheat model behind `proofnet bench cheat`: how likely a cheat is caught, what it is
worth to the cheater, and what checking costs (docs/benchmarks.md, "Cheat table").

A proof commits n segments. Each oracle's draw replays `k` segments picked uniformly without
replacement from all n (`pot.seeds.select_spot_checks`), plus the `t` largest by committed
update norm, and (verifiers, issue 12.4) the first segment a second time. A provider that
fakes m = ceil(f * n) segments is caught by the random picks alone with the hypergeometric

    p(f) = 1 - C(n - m, k) / C(n, k)

(the norm picks only add to it; a cheater committing small norms for its fakes escapes
them, so p(f) is the bound we state).

Expected value of a cheat, measured against doing the job honestly (price P, the provider's
own compute cost C, bond B of which the quorum slashes a share s = slash_permille / 1000):

- honest: P - C;
- cheating, not caught (1 - p): P - (1 - f) C, i.e. it saved f C;
- cheating, caught (p): -(1 - f) C - s B (unpaid, slashed; the compute it did is spent).

    EV = f C - p(f) (P + s B)

A cheat pays on average only when EV > 0. Because p(f) >= f for any k >= 1 (without
replacement the chance of hitting one of m fakes is at least m / n), EV < 0 for every f
whenever C < P + s B: a provider never paid more than its cost of honest work cannot profit
from faking at fixed price (with C = P and k = 1 it breaks even; the slash makes it lose).
The bond compensates the harmed submitter and raises the loss of a single unlucky cheat (p
is 27 % at f = 0.1 and k = 3). The defaults come from:

    k >= ln(1 - p*) / ln(1 - f_min)   (catch a fraction f_min of fakes with probability p*)
    s B >= f C / p(f) - P             (EV <= 0; it is <= 0 itself whenever C <= P)
    v = (k + t + 1) / n <= 5 %        (verification compute, one oracle; x q for a quorum)

so n >= 20 (k + t + 1) segments: with k = 3, t = 2, at least 120 segments, i.e. a job of
S steps checkpoints every S / 120 steps or less. Pure arithmetic; imports nothing of ours
but the defaults it reads.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


def default_spot_checks() -> int:
    """The job spec's default `proof.spot_checks`."""
    from proofnet.messages.jobspec import ProofParams

    value = ProofParams.model_fields["spot_checks"].default
    assert isinstance(value, int)
    return value


def default_top_by_norm() -> int:
    from oracle.verification.proof_checks import TOP_BY_NORM

    return TOP_BY_NORM


def default_slash_permille() -> int:
    from proofnet.settings import Settings

    value = Settings.model_fields["bond_slash_permille"].default
    assert isinstance(value, int)
    return value


@dataclass(frozen=True)
class Terms:
    """The reference job the table is computed for (NTX; costs are the provider's own)."""

    segments: int = 120  # n: 12,000 steps at the default checkpoint interval of 100
    spot_checks: int = 3  # k: random picks per oracle draw
    top_by_norm: int = 2  # t: largest committed update norms, replayed on top
    first_replay: int = 1  # segment 1 replayed once more (verifiers, 12.4)
    price: float = 100.0  # P
    cost: float = 80.0  # C: the provider's compute cost of the honest job
    bond: float = 100.0  # B: the job's min_bond
    slash_permille: int = 500  # s * 1000

    @classmethod
    def defaults(cls) -> Terms:
        return cls(
            spot_checks=default_spot_checks(),
            top_by_norm=default_top_by_norm(),
            slash_permille=default_slash_permille(),
        )

    @property
    def slashed(self) -> float:
        return self.bond * self.slash_permille / 1000

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def faked_segments(fraction: float, segments: int) -> int:
    """Segments a provider fakes to skip `fraction` of the work (at least one)."""
    if not 0 < fraction <= 1:
        raise ValueError("the faked fraction must be in (0, 1]")
    return max(1, math.ceil(fraction * segments - 1e-9))


def detection_probability(segments: int, faked: int, checks: int) -> float:
    """P(at least one of `checks` picks without replacement lands on one of `faked`)."""
    if not 0 <= faked <= segments or checks < 0:
        raise ValueError("need 0 <= faked <= segments and checks >= 0")
    checks = min(checks, segments)
    return 1.0 - math.comb(segments - faked, checks) / math.comb(segments, checks)


def provider_ev(saved_fraction: float, caught: float, terms: Terms) -> float:
    """The cheat's expected gain over honest work: f C - p (P + s B)."""
    return saved_fraction * terms.cost - caught * (terms.price + terms.slashed)


def verification_share(terms: Terms, replayed: int | None = None) -> float:
    """Replayed segments over all segments: verification compute as a share of the job's
    (one oracle's draw; a quorum of q multiplies it by q)."""
    if replayed is None:
        replayed = terms.spot_checks + terms.top_by_norm + terms.first_replay
    return min(replayed, terms.segments + terms.first_replay) / terms.segments


def checks_for(target: float, min_fraction: float) -> int:
    """The least k that catches a fraction `min_fraction` of fakes with probability
    `target` (binomial bound, which the hypergeometric only improves)."""
    return math.ceil(math.log(1 - target) / math.log(1 - min_fraction))


def bond_for(terms: Terms, fraction: float) -> float:
    """The least slashed amount s B that keeps faking `fraction` at EV <= 0 for a provider
    whose cost equals the price (nothing to lose but the bond)."""
    p = detection_probability(
        terms.segments, faked_segments(fraction, terms.segments), terms.spot_checks
    )
    return max(0.0, fraction * terms.price / p - terms.price)


def min_segments(terms: Terms, share: float = 0.05) -> int:
    """The fewest segments for which one draw stays within `share` of the job's compute."""
    return math.ceil((terms.spot_checks + terms.top_by_norm + terms.first_replay) / share)


# -- metering (oracle.verification.metering) ------------------------------------------------
#
# A rate-card provider attests its GPU time T_a; the oracle refuses it above the bound
# B = S x step_v x slack + start-up + allowance, step_v being a same-model verifier's
# measured step time over the committed steps S. Honest: T_a = S x step_p. The verifier's
# and the provider's step times differ by a relative error e ~ N(0, sigma_r), sigma_r =
# sqrt(2) sigma for a per-measurement spread sigma (two GPUs of one model, each timed once).
# Padding by x (T_a = (1 + x) T, T the honest time, a = allowance share of T) is refused when
#
#     (1 + x) > slack (1 + e) + a   <=>   e < ((1 + x) - a) / slack - 1
#
# and a refused attestation is unpaid. The slack is sized so honest work is refused with
# probability Phi(-Z) (Z = 3: 0.13 %): slack = (1 - a) / (1 - Z sigma_r), i.e. the band the
# default slack is designed for is sigma_r = (1 - (1 - a) / slack) / Z.

METERING_Z = 3.0


def normal_cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def design_sigma(slack: float, allowance_share: float) -> float:
    """The ratio noise sigma_r a slack is sized for (honest refusal Phi(-Z))."""
    return max(1 - (1 - allowance_share) / slack, 1e-9) / METERING_Z


def slack_for(sigma_r: float, allowance_share: float) -> float | None:
    """The slack that refuses honest work with probability Phi(-Z) at ratio noise sigma_r;
    None when no slack does (the noise is a third of the time or more)."""
    if METERING_Z * sigma_r >= 1:
        return None
    return (1 - allowance_share) / (1 - METERING_Z * sigma_r)


def padding_refusal(x: float, slack: float, allowance_share: float, sigma_r: float) -> float:
    """P(an attestation padded by x is refused)."""
    return normal_cdf((((1 + x) - allowance_share) / slack - 1) / sigma_r)


def padding_ev(
    x: float, slack: float, allowance_share: float, sigma_r: float, price: float
) -> float:
    """Padding's expected gain over attesting honestly: x P when paid, the price lost when
    the padding (and not the honest work) is what gets it refused."""
    refused = padding_refusal(x, slack, allowance_share, sigma_r)
    honest = padding_refusal(0.0, slack, allowance_share, sigma_r)
    return (1 - refused) * x * price - (refused - honest) * price


def best_padding(
    slack: float, allowance_share: float, sigma_r: float, price: float
) -> tuple[float, float]:
    """The padding x (to 0.1 %) that maximises `padding_ev`, and that expected value."""
    grid = [i / 1000 for i in range(0, 1001)]
    values = [(padding_ev(x, slack, allowance_share, sigma_r, price), x) for x in grid]
    ev, x = max(values)
    return x, ev


def best_attested(
    slack: float, allowance_share: float, sigma: float, price: float
) -> tuple[float, float]:
    """The attested time (1 + x) T, x in [-0.5, 0.5], that maximises the expected payment
    (1 - refused) (1 + x) P at ratio noise `sigma`, and that payment."""
    grid = [i / 1000 - 0.5 for i in range(0, 1001)]
    values = [
        ((1 - padding_refusal(x, slack, allowance_share, sigma)) * (1 + x) * price, x) for x in grid
    ]
    paid, x = max(values)
    return x, paid
