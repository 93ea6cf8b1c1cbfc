"""One delivery over one channel. Each says how it failed: :class:`Retry` (the receiver is
down, busy or answered 5xx: the outbox tries again with a backoff) or :class:`Refused` (it
said no for good: a 4xx, a mailbox that does not exist; kept for the operator)."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage
from typing import NoReturn
from urllib.parse import unquote, urlsplit

import httpx

from service.domain.notify import sign

TIMEOUT_S = 10.0


class DeliveryError(Exception):
    pass


class Retry(DeliveryError):
    pass


class Refused(DeliveryError):
    pass


def _post(url: str, content: bytes, headers: dict[str, str]) -> dict[str, object]:
    try:
        resp = httpx.post(url, content=content, headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise Retry(f"{url}: {type(exc).__name__}: {exc}") from None
    if resp.is_success:
        return {"status": resp.status_code}
    what = f"{url} answered {resp.status_code}"
    if resp.status_code in (408, 425, 429) or resp.status_code >= 500:
        raise Retry(what)
    raise Refused(what)


def webhook(url: str, secret: str, body: bytes, *, event: str, delivery: str) -> dict[str, object]:
    return _post(url, body, {
        "Content-Type": "application/json", "User-Agent": "ootci-notify",
        "X-Ootci-Event": event, "X-Ootci-Delivery": delivery,
        "X-Ootci-Signature": sign(secret, body),
    })


def chat(url: str, text: str) -> dict[str, object]:
    """The incoming-webhook shape Slack, Mattermost, Rocket.Chat and Teams' connectors take."""
    import json

    return _post(url, json.dumps({"text": text}).encode(),
                 {"Content-Type": "application/json", "User-Agent": "ootci-notify"})


def email(smtp_url: str, sender: str, to: str, subject: str, text: str) -> dict[str, object]:
    if not smtp_url:
        raise Retry("OOTCI_SMTP_URL is not set: email waits in the outbox")
    parts = urlsplit(smtp_url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise Retry(f"OOTCI_SMTP_URL is not smtp://host[:port] or smtps://...: {parts.scheme}://")
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    message.set_content(text)
    client = smtplib.SMTP_SSL if parts.scheme == "smtps" else smtplib.SMTP
    try:
        with client(parts.hostname, parts.port or (465 if parts.scheme == "smtps" else 25),
                    timeout=TIMEOUT_S) as smtp:
            smtp.ehlo()
            if parts.scheme == "smtp" and smtp.has_extn("starttls"):
                smtp.starttls()
                smtp.ehlo()
            if parts.username:
                smtp.login(unquote(parts.username), unquote(parts.password or ""))
            refused = smtp.send_message(message)
    except smtplib.SMTPRecipientsRefused as exc:
        code, said = next(iter(exc.recipients.values()))
        _raise_for(code, f"{parts.hostname} refused {to}: {code} {_str(said)}")
    except smtplib.SMTPResponseException as exc:
        _raise_for(exc.smtp_code, f"{parts.hostname}: {exc.smtp_code} {_str(exc.smtp_error)}")
    except (OSError, smtplib.SMTPException) as exc:
        raise Retry(f"{parts.hostname}: {type(exc).__name__}: {exc}") from None
    if refused:
        raise Refused(f"{parts.hostname} refused {', '.join(refused)}")
    return {"to": to}


def _str(said: bytes | str) -> str:
    return said.decode(errors="replace") if isinstance(said, bytes) else said


def _raise_for(code: int, what: str) -> NoReturn:
    # SMTP: 4xx is "try again later", 5xx is "no".
    one_line = " ".join(what.split())
    if 400 <= code < 500:
        raise Retry(one_line)
    raise Refused(one_line)
