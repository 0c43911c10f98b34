"""The application API: a Samza-style high-level operator chain on MessageStream.

An application is a factory `build(app: ApplicationDescriptor) -> None` named by
`app.class=module:factory`; it takes input streams, chains operators, and sends
results to outputs.
"""

from elasticity.api.context import KeyValueStore, Table, TaskContext
from elasticity.api.descriptors import StoreDescriptor, TableDescriptor
from elasticity.api.stream import KV, ApplicationDescriptor, Message, MessageStream, OutputStream
from elasticity.api.window import Aggregation, Window, WindowPane, Windows

__all__ = [
    "KV",
    "KeyValueStore",
    "Aggregation",
    "ApplicationDescriptor",
    "Message",
    "MessageStream",
    "OutputStream",
    "StoreDescriptor",
    "Table",
    "TableDescriptor",
    "TaskContext",
    "Window",
    "WindowPane",
    "Windows",
]
