"""A Protobuf message class made at import from its descriptor, as protoc's generated `_pb2` module would
make it (no protoc here): `Order { int64 order_id = 1; string user = 2; double amount = 3; }` in package shop."""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_FILE = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
_MESSAGE = _FILE.message_type.add(name="Order")
for number, (name, kind) in enumerate(
    [
        ("order_id", descriptor_pb2.FieldDescriptorProto.TYPE_INT64),
        ("user", descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
        ("amount", descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE),
    ],
    start=1,
):
    _MESSAGE.field.add(name=name, number=number, type=kind, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)

_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_FILE)
Order = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("shop.Order"))
