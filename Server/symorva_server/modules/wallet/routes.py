"""The wallet's HTTP API (docs/wallet.md) and its capabilities entry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse

from ...auth import AUTH_ERRORS, AuthenticatedUser, require_admin, require_development, require_user
from ...errors import ErrorBody
from .config import CONFIRM_PAYLOAD_VERSION
from .domain import Wallet
from .models import (BalancesOut, CommandAnswer, ConfirmRequest, CreditOut, CreditRequest, DraftOut, HoldOut,
                     HoldRequest, PinOut, PinRequest, PinSetOut, PrepareRequest, TransferPage, UnlockAuditOut,
                     UnlockRequest)
from .pin import MAX_PIN_ATTEMPTS, PIN_MAX_LENGTH, PIN_MIN_LENGTH

if TYPE_CHECKING:
    from ...context import ServerContext

PREFIX = "/_symorva/v1/wallet"
TEST_PREFIX = "/_symorva/v1/test/wallet"


def capabilities(ctx: ServerContext, options: dict[str, Any]) -> dict[str, Any]:
    w = _enabled(ctx)
    return {
        "verification_methods": w.config.verification_methods,
        "sealing_key": ctx.sealing_key.public_info(),
        "assets": [a.public() for a in w.config.assets.values()],
        "draft_ttl_ms": w.config.draft_ttl_ms,
        "pin": {"min_length": PIN_MIN_LENGTH, "max_length": PIN_MAX_LENGTH, "max_attempts": MAX_PIN_ATTEMPTS},
        "payload_version": CONFIRM_PAYLOAD_VERSION,
    }


def _enabled(ctx: ServerContext) -> Wallet:
    assert ctx.wallet is not None, "the wallet's routes and capabilities exist only when it is enabled"
    return ctx.wallet


def _wallet(request: Request) -> Wallet:
    return _enabled(request.app.state.ctx)


_E400 = {"model": ErrorBody, "description": "Invalid request (SY_BAD_JSON, SY_MISSING_PARAM, SY_INVALID_PARAM)"}

router = APIRouter(tags=["wallet"], responses=AUTH_ERRORS)


@router.get(f"{PREFIX}/balances", response_model=BalancesOut, summary="The member's balances")
def wallet_balances(request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).balances(user.user_id)


@router.get(f"{PREFIX}/transfers", response_model=TransferPage,
            responses={400: _E400}, summary="The member's transfers and credits, newest first")
def wallet_transfers(
    request: Request,
    from_: str | None = Query(default=None, alias="from", max_length=32,
                              description="next_from of the previous page."),
    limit: int = Query(default=20, ge=1, le=100),
    user: AuthenticatedUser = Depends(require_user),
) -> Any:
    return _wallet(request).history(user.user_id, from_, limit)


@router.get(f"{PREFIX}/pin", response_model=PinOut, summary="Whether the member has a PIN, and lock state")
def wallet_pin_state(request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).get_pin(user.user_id)


@router.post(
    f"{PREFIX}/pin", response_model=PinSetOut,
    responses={
        400: {"model": ErrorBody, "description": "SY_BAD_SEALED_PAYLOAD, SY_INVALID_PIN, SY_INVALID_PARAM, ..."},
        403: {"model": ErrorBody, "description": "SY_WRONG_PIN (with attempts_left), SY_WALLET_LOCKED"},
        409: {"model": ErrorBody, "description": "SY_PIN_ALREADY_SET, SY_PIN_NOT_SET"},
    },
    summary="Set the first PIN, or change it (sealed, with the old PIN)")
def wallet_set_pin(body: PinRequest, request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).set_pin(user.user_id, body.sealed)


@router.post(
    f"{PREFIX}/transfers/prepare", response_model=DraftOut,
    responses={
        400: {"model": ErrorBody, "description": "SY_INVALID_AMOUNT, SY_UNKNOWN_ASSET, SY_INVALID_RECIPIENT, SY_INVALID_PARAM, ..."},
        403: {"model": ErrorBody, "description": "SY_WALLET_LOCKED"},
        404: {"model": ErrorBody, "description": "SY_RECIPIENT_UNKNOWN"},
        409: {"model": ErrorBody, "description": "SY_INSUFFICIENT_FUNDS, SY_PIN_NOT_SET"},
    },
    summary="Price a transfer: returns a draft to confirm")
def wallet_prepare(body: PrepareRequest, request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).prepare(user.user_id, body)


@router.post(
    f"{PREFIX}/transfers/confirm", response_model=CommandAnswer,
    responses={
        400: {"model": ErrorBody, "description": "Malformed request (not recorded: the command ID is not spent)"},
        429: {"model": ErrorBody,
              "description": "A rate-limited confirm is not recorded: the command ID is not spent, and the "
                             "same confirm may be sent again after the hint."},
    },
    summary="Confirm a draft with a command ID (idempotent: a repeated command ID gets the first answer)")
def wallet_confirm(body: ConfirmRequest, request: Request, user: AuthenticatedUser = Depends(require_user)) -> Any:
    answer, replayed = _wallet(request).confirm(user.user_id, body)
    return JSONResponse(answer, headers={"Symorva-Replayed": "true"} if replayed else None)


@router.get(
    f"{PREFIX}/commands/{{command_id}}", response_model=CommandAnswer,
    responses={400: _E400},
    summary="Outcome of a command; an unknown command ID is fenced (can never execute afterwards)")
def wallet_command(request: Request, command_id: str = Path(max_length=36),
                   user: AuthenticatedUser = Depends(require_user)) -> Any:
    return JSONResponse(_wallet(request).query(user.user_id, command_id))


_ADMIN_DOC = " For the community's admins (manifest `services.admins`)."
_E403_ADMIN = {"model": ErrorBody, "description": "SY_NOT_ADMIN: the caller is not an admin of this community"}


@router.post(
    f"{PREFIX}/admin/unlock", response_model=PinOut,
    responses={
        400: {"model": ErrorBody, "description": "SY_INVALID_RECIPIENT (not a member ID of this server), SY_INVALID_PARAM, ..."},
        403: _E403_ADMIN,
        404: {"model": ErrorBody, "description": "SY_WALLET_UNKNOWN: the member has no wallet"},
    },
    summary="Lift a member's wrong-PIN lock (optionally forget the PIN); recorded in the unlock audit." + _ADMIN_DOC)
def wallet_admin_unlock(body: UnlockRequest, request: Request,
                        admin: AuthenticatedUser = Depends(require_admin)) -> Any:
    return _wallet(request).admin_unlock(admin.user_id, body)


@router.get(
    f"{PREFIX}/admin/unlocks", response_model=UnlockAuditOut, responses={400: _E400, 403: _E403_ADMIN},
    summary="The unlock audit (lock expiries, admin and test unlocks), newest first." + _ADMIN_DOC)
def wallet_admin_unlocks(request: Request,
                         user_id: str | None = Query(default=None, max_length=255, description="Only this member."),
                         limit: int = Query(default=50, ge=1, le=500),
                         _admin: AuthenticatedUser = Depends(require_admin)) -> Any:
    return _wallet(request).unlocks(user_id, limit)


@router.post(
    f"{PREFIX}/admin/credit", response_model=CreditOut,
    responses={
        400: {"model": ErrorBody, "description": "SY_INVALID_AMOUNT, SY_UNKNOWN_ASSET, SY_INVALID_RECIPIENT, SY_INVALID_PARAM, ..."},
        403: {"model": ErrorBody,
              "description": "SY_NOT_IN_DEVELOPMENT (production mode: never credits), SY_NOT_ADMIN"},
    },
    summary="Development mode only: credit a member (creates their wallet), e.g. a newcomer's first "
            "funds; a `credit` entry in their history." + _ADMIN_DOC)
def wallet_admin_credit(body: CreditRequest, request: Request, _dev: None = Depends(require_development),
                        _admin: AuthenticatedUser = Depends(require_admin)) -> Any:
    return _wallet(request).credit(body)


_TEST_DOC = " Only exists when the server runs with --test."

test_router = APIRouter(tags=["testing"], responses=AUTH_ERRORS)


@test_router.post(f"{TEST_PREFIX}/credit", response_model=CreditOut, responses={400: _E400},
                  summary="Credit a member (creates their wallet)." + _TEST_DOC)
def wallet_test_credit(body: CreditRequest, request: Request,
                       _user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).credit(body)


@test_router.post(f"{TEST_PREFIX}/unlock", response_model=PinOut, responses={400: _E400},
                  summary="Reset a member's wrong-PIN counter and lock (optionally forget the PIN)." + _TEST_DOC)
def wallet_test_unlock(body: UnlockRequest, request: Request,
                       user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).unlock(body, actor=user.user_id)


@test_router.post(f"{TEST_PREFIX}/hold", response_model=HoldOut, responses={400: _E400},
                  summary="Hold the next confirm(s) as pending for delay_ms before executing." + _TEST_DOC)
def wallet_test_hold(body: HoldRequest, request: Request,
                     _user: AuthenticatedUser = Depends(require_user)) -> Any:
    return _wallet(request).hold(body)

