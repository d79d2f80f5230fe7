//===- Rendezvous.cpp - ranks meet over TCP to share NCCL's unique id -----===//
//
// Ranks on different machines cannot share a file, so the unique id that
// rank 0 draws (ncclGetUniqueId) reaches the others over a TCP socket: rank 0
// listens on MASTER_ADDR's port MEMOPT_RDZV_PORT (MASTER_PORT + 1 when unset),
// every other rank connects, says who it is, and receives the id once all
// WORLD_SIZE - 1 of them have arrived.
//
// Taken from NCCL's own bootstrap (src/bootstrap.cc: a root listening on a
// socket whose address travels inside the unique id; every rank connects and
// sends its rank and the group size, which the root checks) and from
// torch.distributed's TCPStore (the server on the master, clients that retry
// their connect until it is up, one timeout for the whole rendezvous).
// Why not torchrun's own store on MASTER_PORT: speaking TCPStore's client
// protocol ties the runtime to PyTorch's private, unspecified wire format
// (its server was rewritten on libuv in 2.4); a server of our own is small
// and works under any launcher (torchrun, Slurm's srun, mpirun, by hand)
// that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
// Where we went further than NCCL's bootstrap: the root waits for every rank
// before answering any, so a rank that never comes is named ("ranks 2, 3 of 4
// did not arrive within 300 s") rather than leaving the others to hang inside
// ncclCommInitRank; a duplicate rank, a rank outside the group or a different
// WORLD_SIZE is refused with a message sent to that rank and reported by rank
// 0; a rank that joins a server of an earlier launch sees the other launch's
// world size or a closed socket, not a stale id.
//
// Wire format (all integers little-endian int32): hello = "MEMORDV1", rank,
// world size; answer = "MEMORDV1", status (0: the id follows; 1: an error
// message follows), length, bytes.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Rendezvous.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace memopt::rt {

namespace {

constexpr char kMagic[8] = {'M', 'E', 'M', 'O', 'R', 'D', 'V', '1'};
constexpr int32_t kStatusId = 0;
constexpr int32_t kStatusError = 1;
constexpr int32_t kMaxPayload = 1 << 16;

using Clock = std::chrono::steady_clock;

std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

/// Milliseconds left before `deadline` (0 when past it).
int millisecondsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return left > 0 ? int(std::min<long long>(left, 1 << 30)) : 0;
}

/// Sends all of `bytes`; false when the peer went away.
bool sendAll(int fd, const void *data, size_t bytes) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t sent = send(fd, p, bytes, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent <= 0)
      return false;
    p += sent;
    bytes -= size_t(sent);
  }
  return true;
}

/// Receives exactly `bytes` before `deadline`. Returns 1 on success, 0 when
/// the peer closed the connection, -1 on a timeout or an error.
int receiveAll(int fd, void *data, size_t bytes, Clock::time_point deadline) {
  char *p = static_cast<char *>(data);
  while (bytes > 0) {
    pollfd entry{fd, POLLIN, 0};
    int ready = poll(&entry, 1, millisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      return -1;
    ssize_t got = recv(fd, p, bytes, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got == 0)
      return 0;
    if (got < 0)
      return -1;
    p += got;
    bytes -= size_t(got);
  }
  return 1;
}

void appendInt(std::string &out, int32_t value) {
  unsigned char bytes[4] = {
      static_cast<unsigned char>(value & 0xff),
      static_cast<unsigned char>((value >> 8) & 0xff),
      static_cast<unsigned char>((value >> 16) & 0xff),
      static_cast<unsigned char>((uint32_t(value) >> 24) & 0xff)};
  out.append(reinterpret_cast<const char *>(bytes), 4);
}

int32_t readInt(const unsigned char *bytes) {
  return int32_t(uint32_t(bytes[0]) | uint32_t(bytes[1]) << 8 |
                 uint32_t(bytes[2]) << 16 | uint32_t(bytes[3]) << 24);
}

std::string answer(int32_t status, const void *payload, size_t bytes) {
  std::string out(kMagic, sizeof kMagic);
  appendInt(out, status);
  appendInt(out, int32_t(bytes));
  out.append(static_cast<const char *>(payload), bytes);
  return out;
}

void closeAll(std::vector<int> &fds) {
  for (int fd : fds)
    if (fd >= 0)
      close(fd);
  fds.clear();
}

/// "2, 3" for the ranks in [1, worldSize) that `arrived` lacks.
std::string missingRanks(const std::vector<int> &connection) {
  std::string list;
  int count = 0;
  for (size_t r = 1; r < connection.size(); ++r)
    if (connection[r] < 0) {
      if (count++ == 8) {
        list += ", ...";
        break;
      }
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    }
  return list;
}

} // namespace

RendezvousServer::~RendezvousServer() {
  if (fd_ >= 0)
    close(fd_);
}

bool RendezvousServer::listen(int port, std::string &error) {
  // Dual-stack where the machine has IPv6 (clients may resolve MASTER_ADDR
  // to either family), plain IPv4 otherwise.
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  bool v6 = fd >= 0;
  if (!v6)
    fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    error = std::string("rendezvous: socket: ") + std::strerror(errno);
    return false;
  }
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound;
  if (v6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(uint16_t(port));
    bound = bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(uint16_t(port));
    bound = bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address);
  }
  if (bound != 0 || ::listen(fd, 128) != 0) {
    error = "rendezvous: rank 0 cannot listen on port " + std::to_string(port) +
            ": " + std::strerror(errno) +
            (errno == EADDRINUSE
                 ? " (another process holds it: set MEMOPT_RDZV_PORT to a "
                   "free port, the same for every rank)"
                 : "");
    close(fd);
    return false;
  }
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  getsockname(fd, reinterpret_cast<sockaddr *>(&local), &length);
  port_ = ntohs(local.ss_family == AF_INET6
                    ? reinterpret_cast<sockaddr_in6 *>(&local)->sin6_port
                    : reinterpret_cast<sockaddr_in *>(&local)->sin_port);
  fd_ = fd;
  return true;
}

bool RendezvousServer::serve(int worldSize, const void *id, size_t bytes,
                             double timeoutSeconds, std::string &error) {
  if (fd_ < 0) {
    error = "rendezvous: the server is not listening";
    return false;
  }
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeoutSeconds));
  // connection[r]: the socket of rank r once it has said hello.
  std::vector<int> connection(size_t(worldSize), -1);
  std::vector<int> refused; // answered with an error, closed at the end
  std::string problems;
  int arrived = 1; // rank 0 is here
  while (arrived < worldSize) {
    // The listening socket and every rank that has arrived: a rank whose
    // process dies while the others are still coming closes its connection,
    // and is then counted missing again (and named) instead of being handed
    // an id it can no longer use, which would leave the others hanging in
    // ncclCommInitRank.
    std::vector<pollfd> entries{{fd_, POLLIN, 0}};
    for (int fd : connection)
      if (fd >= 0)
        entries.push_back({fd, POLLIN, 0});
    int ready = poll(entries.data(), nfds_t(entries.size()),
                     millisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0) {
      error = "rendezvous: rank" +
              std::string(worldSize - arrived > 1 ? "s " : " ") +
              missingRanks(connection) + " of " + std::to_string(worldSize) +
              " did not arrive at rank 0 (port " + std::to_string(port_) +
              ") within " + formatSeconds(timeoutSeconds) +
              " s (MEMOPT_NCCL_ID_TIMEOUT): are they running, with the same "
              "MASTER_ADDR and MEMOPT_RDZV_PORT / MASTER_PORT?" +
              problems;
      // The ranks that did come learn why they get no id.
      std::string reply = answer(kStatusError, error.data(), error.size());
      for (int fd : connection)
        if (fd >= 0)
          sendAll(fd, reply.data(), reply.size());
      closeAll(connection);
      closeAll(refused);
      return false;
    }
    for (size_t k = 1; k < entries.size(); ++k) {
      if (!(entries[k].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      char byte;
      ssize_t got = recv(entries[k].fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
                                  errno == EINTR)))
        continue;
      for (size_t r = 1; r < connection.size(); ++r)
        if (connection[r] == entries[k].fd) {
          close(connection[r]);
          connection[r] = -1;
          --arrived;
          problems += "; rank " + std::to_string(r) +
                      " connected, then closed its connection (its process "
                      "died or was stopped?)";
        }
    }
    if (!(entries[0].revents & POLLIN))
      continue;
    int client = accept(fd_, nullptr, nullptr);
    if (client < 0)
      continue;
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A hello must come promptly once connected; a silent peer (a port
    // scanner, a stuck process) is dropped after a few seconds.
    unsigned char hello[sizeof kMagic + 8];
    auto helloDeadline =
        std::min(deadline, Clock::now() + std::chrono::seconds(10));
    if (receiveAll(client, hello, sizeof hello, helloDeadline) != 1 ||
        std::memcmp(hello, kMagic, sizeof kMagic) != 0) {
      close(client);
      continue;
    }
    int32_t rank = readInt(hello + sizeof kMagic);
    int32_t world = readInt(hello + sizeof kMagic + 4);
    std::string why;
    if (world != worldSize)
      why = "rank " + std::to_string(rank) +
            " has WORLD_SIZE=" + std::to_string(world) +
            "; rank 0 has WORLD_SIZE=" + std::to_string(worldSize) +
            " (a process of another launch?)";
    else if (rank <= 0 || rank >= worldSize)
      why = "a process says it is rank " + std::to_string(rank) +
            ", outside [1, " + std::to_string(worldSize) + ")";
    else if (connection[size_t(rank)] >= 0)
      why = "two processes say they are rank " + std::to_string(rank);
    if (!why.empty()) {
      std::string reply = answer(kStatusError, why.data(), why.size());
      sendAll(client, reply.data(), reply.size());
      refused.push_back(client);
      problems += "; refused: " + why;
      continue;
    }
    connection[size_t(rank)] = client;
    ++arrived;
  }
  std::string reply = answer(kStatusId, id, bytes);
  bool ok = true;
  for (int r = 1; r < worldSize; ++r)
    if (!sendAll(connection[size_t(r)], reply.data(), reply.size())) {
      error = "rendezvous: rank " + std::to_string(r) +
              " went away before it received the id";
      ok = false;
    }
  closeAll(connection);
  closeAll(refused);
  if (ok && !problems.empty()) {
    // Every rank has its id, but something else tried to join: report it
    // without failing the launch.
    std::fprintf(stderr, "memopt: rendezvous%s\n", problems.c_str());
  }
  return ok;
}

bool joinRendezvous(const std::string &host, int port, int rank, int worldSize,
                    double timeoutSeconds, void *id, size_t bytes,
                    std::string &error) {
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(timeoutSeconds));
  std::string where = host + ":" + std::to_string(port);
  std::string lastFailure;
  int fd = -1;
  // Rank 0 may not be listening yet: retry the connect until the deadline.
  while (fd < 0) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    int status =
        getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (status != 0) {
      lastFailure = std::string("cannot resolve MASTER_ADDR '") + host +
                    "': " + gai_strerror(status);
    } else {
      for (addrinfo *a = found; a && fd < 0; a = a->ai_next) {
        int s = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (s < 0)
          continue;
        if (connect(s, a->ai_addr, a->ai_addrlen) == 0) {
          fd = s;
        } else {
          lastFailure = std::string("connect: ") + std::strerror(errno);
          close(s);
        }
      }
      freeaddrinfo(found);
    }
    if (fd >= 0)
      break;
    if (Clock::now() >= deadline) {
      error = "rendezvous: rank " + std::to_string(rank) +
              " could not reach rank 0 at " + where + " within " +
              formatSeconds(timeoutSeconds) +
              " s (MEMOPT_NCCL_ID_TIMEOUT; last: " + lastFailure +
              "): is rank 0 running, and MASTER_ADDR and MEMOPT_RDZV_PORT / "
              "MASTER_PORT the same for every rank?";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::string hello(kMagic, sizeof kMagic);
  appendInt(hello, rank);
  appendInt(hello, worldSize);
  unsigned char header[sizeof kMagic + 8];
  int got = sendAll(fd, hello.data(), hello.size())
                ? receiveAll(fd, header, sizeof header, deadline)
                : 0;
  if (got != 1 || std::memcmp(header, kMagic, sizeof kMagic) != 0) {
    close(fd);
    error = "rendezvous: rank " + std::to_string(rank) + " reached " + where +
            (got < 0 ? " but rank 0 did not answer within " +
                           formatSeconds(timeoutSeconds) +
                           " s (MEMOPT_NCCL_ID_TIMEOUT): another rank is "
                           "missing, see rank 0's message"
                     : " but the peer closed the connection or is not a "
                       "memopt rank 0 (another service on that port? set "
                       "MEMOPT_RDZV_PORT)");
    return false;
  }
  int32_t status = readInt(header + sizeof kMagic);
  int32_t length = readInt(header + sizeof kMagic + 4);
  if (length < 0 || length > kMaxPayload) {
    close(fd);
    error = "rendezvous: rank " + std::to_string(rank) +
            ": a malformed answer from " + where;
    return false;
  }
  std::string payload(size_t(length), '\0');
  got = length ? receiveAll(fd, &payload[0], size_t(length), deadline) : 1;
  close(fd);
  if (got != 1) {
    error = "rendezvous: rank " + std::to_string(rank) + ": the answer from " +
            where + " was cut short";
    return false;
  }
  if (status == kStatusError) {
    error = "rendezvous: rank 0 answered rank " + std::to_string(rank) + ": " +
            payload;
    return false;
  }
  if (status != kStatusId || size_t(length) != bytes) {
    error = "rendezvous: rank " + std::to_string(rank) + ": rank 0 at " +
            where + " sent " + std::to_string(length) + " bytes of id, not " +
            std::to_string(bytes);
    return false;
  }
  std::memcpy(id, payload.data(), bytes);
  return true;
}

} // namespace memopt::rt
