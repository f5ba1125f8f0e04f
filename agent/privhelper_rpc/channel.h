// The one place the agent makes its gRPC channel to privhelper's unix socket (privhelper's
// `privhelper_socket`, agent/state/config.h), with the one set of channel arguments, and sets
// a call's deadline (the values: deadlines.h). Every caller uses it: Probe
// (privhelper_client.h), Execute (agent/requests/privhelper_executor.h), the preparation and
// retirement calls (agent/generations/privhelper_preparation.h, privhelper_retirement.h).
//
// Two kinds of channel, the same arguments:
//   - PrivhelperChannel(path): gRPC connects the socket itself, and again after privhelper
//     restarts (the blocking callers, each on its own thread). gRPC shares one connection
//     among such channels (Probe, collection, ListGenerations), except a channel asked for with
//     a connection of its own (the preparation's, so an artifact's long upload stream never
//     shares a connection with the probes).
//   - ConnectPrivhelperSocket + PrivhelperChannelOnSocket: the caller connects the socket and
//     gRPC makes a direct channel on it, never reconnected behind the caller's back (the
//     executor, whose event loop watches that socket).
//
// This header includes gRPC's: include it from .cc files only (the headers of the callers
// keep gRPC out).
#ifndef SANDBOX_NODE_AGENT_PRIVHELPER_RPC_CHANNEL_H_
#define SANDBOX_NODE_AGENT_PRIVHELPER_RPC_CHANNEL_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/status.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/privhelper.grpc.pb.h"

namespace sn::agent {

// privhelper's channel arguments: messages up to proto/execute_stream.h's bounds each way (a
// response may carry a whole read_file result; a request a payload chunk or a specification);
// the stream window is privhelper's fixed one, so no BDP probe (its pings would wake both
// ends).
grpc::ChannelArguments PrivhelperChannelArguments();

enum class PrivhelperConnection {
  kShared,  // the connection gRPC shares among this process's channels to privhelper
  kOwn,     // a connection of this channel's own
};

// A channel to privhelper's socket at `socket_path`; gRPC connects it on the first call.
std::shared_ptr<grpc::Channel> PrivhelperChannel(
    const std::string& socket_path,
    PrivhelperConnection connection = PrivhelperConnection::kShared);

// A stub on PrivhelperChannel(socket_path, connection).
std::unique_ptr<privhelper::v1::PrivHelper::Stub> PrivhelperStub(
    const std::string& socket_path,
    PrivhelperConnection connection = PrivhelperConnection::kShared);

// Connects a unix stream socket (close-on-exec) to privhelper's `socket_path`: the descriptor,
// or Unavailable (InvalidArgument when the path does not fit a socket address).
absl::StatusOr<int> ConnectPrivhelperSocket(const std::string& socket_path);

// A direct channel on `fd`, a socket connected with ConnectPrivhelperSocket. gRPC owns `fd`
// from here (and makes it non-blocking).
std::shared_ptr<grpc::Channel> PrivhelperChannelOnSocket(int fd);

// Sets `ctx`'s deadline `timeout` from now.
void SetCallDeadline(grpc::ClientContext* ctx, absl::Duration timeout);

// "privhelper <call> failed (grpc code <n>): <message>", for the local log.
std::string CallError(const char* call, const grpc::Status& status);

}  // namespace sn::agent

#endif  // SANDBOX_NODE_AGENT_PRIVHELPER_RPC_CHANNEL_H_
