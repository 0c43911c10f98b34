"""The application API: a Samza-style high-level operator chain on MessageStream.

An application is a factory `build(app: ApplicationDescriptor) -> None` named by
`app.class=module:factory`; it takes input streams, chains operators, and sends
results to outputs.
"""

from .context import TaskContext
from .stream import KV, ApplicationDescriptor, Message, MessageStream, OutputStream
from .window import Aggregation, Window, WindowPane, Windows

__all__ = ["KV", "Aggregation", "ApplicationDescriptor", "Message", "MessageStream", "OutputStream", "TaskContext", "Window",
           "WindowPane", "Windows"]
