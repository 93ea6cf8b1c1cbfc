"""What a child process of a step runs in: its sandbox, its network namespace, its
environment, and how it is started, streamed and killed."""
