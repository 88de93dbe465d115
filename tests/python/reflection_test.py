"""A client nobody here wrote: grpcio-reflection lists placementd's services
and calls ListDevices from the descriptors alone (no .proto files); the
standard grpc.health.v1 client checks health."""
import os
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
from google.protobuf import descriptor_pool
from google.protobuf import message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def get_message_class(pool, full_name):
    descriptor = pool.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


class ReflectionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        ready = os.path.join(cls.tmp.name, "ready")
        cls.proc = subprocess.Popen(
            [os.environ["PLACEMENTD_BIN"], "--listen=127.0.0.1:0", "--backend=cpu",
             "--ready_file=" + ready],
            stderr=subprocess.PIPE)
        deadline = time.time() + 30
        while time.time() < deadline and not os.path.exists(ready):
            time.sleep(0.05)
        with open(ready) as f:
            cls.address = f.read().strip()
        cls.channel = grpc.insecure_channel(cls.address)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.proc.terminate()
        cls.proc.wait(timeout=30)
        cls.tmp.cleanup()

    def test_lists_every_service(self):
        db = ProtoReflectionDescriptorDatabase(self.channel)
        services = set(db.get_services())
        for name in ["placement.v1.DeviceService", "placement.v1.DaemonService",
                     "grpc.health.v1.Health"]:
            self.assertIn(name, services)

    def test_calls_list_devices_from_descriptors_alone(self):
        db = ProtoReflectionDescriptorDatabase(self.channel)
        pool = descriptor_pool.DescriptorPool(db)
        service = pool.FindServiceByName("placement.v1.DeviceService")
        method = service.FindMethodByName("ListDevices")
        request_cls = get_message_class(pool, method.input_type.full_name)
        response_cls = get_message_class(pool, method.output_type.full_name)
        call = self.channel.unary_unary(
            "/placement.v1.DeviceService/ListDevices",
            request_serializer=request_cls.SerializeToString,
            response_deserializer=response_cls.FromString)
        response = call(request_cls(), timeout=10)
        self.assertEqual(len(response.devices), 8)
        self.assertEqual(response.devices[7].id, 7)
        self.assertEqual(response.devices[0].platform, "cpu")

    def test_every_method_has_a_descriptor(self):
        db = ProtoReflectionDescriptorDatabase(self.channel)
        pool = descriptor_pool.DescriptorPool(db)
        count = 0
        for name in db.get_services():
            if not name.startswith("placement.v1."):
                continue
            service = pool.FindServiceByName(name)
            for method in service.methods:
                self.assertTrue(method.input_type.full_name)
                self.assertTrue(method.output_type.full_name)
                count += 1
        self.assertGreaterEqual(count, 5)

    def test_health_is_serving(self):
        stub = health_pb2_grpc.HealthStub(self.channel)
        response = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        self.assertEqual(response.status, health_pb2.HealthCheckResponse.SERVING)


if __name__ == "__main__":
    unittest.main(verbosity=2)
