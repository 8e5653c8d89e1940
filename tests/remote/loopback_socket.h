// A TCP socket of the tests' own on 127.0.0.1, on a port the system picks: what the tests'
// small servers listen on, and (never listened on) a port that refuses connections.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <doctest/doctest.h>

namespace jtree::remote_testing {

/// A new socket bound to 127.0.0.1 on a free port, which `*port` receives; listening with
/// `backlog` connections when `backlog` > 0. The caller closes it.
inline int bind_loopback(int* port, int backlog) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  if (backlog > 0) REQUIRE(::listen(fd, backlog) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  *port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace jtree::remote_testing
