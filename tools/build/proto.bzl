"""cc_proto_grpc_library: C++ protobuf (+ gRPC) code from a .proto with the system protoc.

Avoids rules_proto and @com_google_protobuf (which would be downloaded). The system protoc and
grpc_cpp_plugin are not inputs Bazel tracks: `bazel clean` after upgrading those packages.
"""

def cc_proto_grpc_library(name, src, deps = [], proto_deps = [], grpc = False, visibility = None):
    """Generates <name> (cc_library) from one .proto file.

    Args:
      name: the cc_library's name.
      src: the .proto file, in this package.
      deps: cc_proto_grpc_library targets of the imported .proto files.
      proto_deps: the imported .proto files (so they are visible in the sandbox).
      grpc: also generate the gRPC service stubs.
      visibility: of the cc_library.
    """
    base = src[:-len(".proto")]
    pkg = native.package_name()
    prefix = (pkg + "/") if pkg else ""
    outs = [base + ".pb.h", base + ".pb.cc"]
    cmd = "$(location @sandbox_node//tools/build:protoc_wrapper) --proto_path=. --cpp_out=$(GENDIR)"
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
        cmd += " --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) --grpc_out=$(GENDIR)"
    cmd += " " + prefix + src
    native.genrule(
        name = name + "_gen",
        srcs = [src] + proto_deps,
        outs = outs,
        cmd = cmd,
        tools = ["@sandbox_node//tools/build:protoc_wrapper"],
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party/system:protobuf"] + (["//third_party/system:grpc"] if grpc else []),
        visibility = visibility,
    )
