"""The gRPC stubs of coordd's API (package coord.v1): protoc's
*_pb2.py (messages), *_pb2.pyi (their types) and *_pb2_grpc.py (service
stubs) for each file of api/proto3/coord/v1, with their imports of each
other made package-relative.

Generated, and checked for drift in CI, by api/proto3's
TestPythonStubsAreCurrent; regenerate them with

    go test ./api/proto3 -run TestPythonStubsAreCurrent -update
"""
