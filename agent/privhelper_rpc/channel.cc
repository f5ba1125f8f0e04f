#include "agent/privhelper_rpc/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpcpp/create_channel.h>
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/execute_stream.h"

namespace sn::agent {

grpc::ChannelArguments PrivhelperChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(privhelper::kMaxResponseMessageBytes));
  args.SetMaxSendMessageSize(static_cast<int>(privhelper::kMaxRequestMessageBytes));
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  return args;
}

std::shared_ptr<grpc::Channel> PrivhelperChannel(const std::string& socket_path,
                                                 PrivhelperConnection connection) {
  grpc::ChannelArguments args = PrivhelperChannelArguments();
  // gRPC's process-wide pool gives channels with the same target and arguments one
  // connection; a pool of the channel's own gives it its own.
  if (connection == PrivhelperConnection::kOwn) {
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  }
  return grpc::CreateCustomChannel(absl::StrCat("unix:", socket_path),
                                   grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<privhelper::v1::PrivHelper::Stub> PrivhelperStub(
    const std::string& socket_path, PrivhelperConnection connection) {
  return privhelper::v1::PrivHelper::NewStub(PrivhelperChannel(socket_path, connection));
}

absl::StatusOr<int> ConnectPrivhelperSocket(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError("privhelper socket path too long");
  }
  memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect ", socket_path, ": ", strerror(err)));
  }
  return fd;
}

std::shared_ptr<grpc::Channel> PrivhelperChannelOnSocket(int fd) {
  return grpc::CreateCustomInsecureChannelFromFd("privhelper", fd, PrivhelperChannelArguments());
}

void SetCallDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
}

std::string CallError(const char* call, const grpc::Status& status) {
  return absl::StrCat("privhelper ", call, " failed (grpc code ",
                      static_cast<int>(status.error_code()), "): ", status.error_message());
}

}  // namespace sn::agent
