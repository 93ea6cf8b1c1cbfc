"""Notifications out: delivery over webhooks, chat webhooks and SMTP (``channels``), and
the drain that sends what the outbox holds for them (``drain``)."""
