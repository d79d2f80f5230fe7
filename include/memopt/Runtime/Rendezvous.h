//===- Rendezvous.h - ranks meet over TCP ------------------------*- C++
//-*-===//
//
// How the ranks of one launch hand NCCL's unique id from rank 0 to the
// others when they do not share a file system: rank 0 listens on a TCP
// port (RendezvousServer), every other rank connects to MASTER_ADDR at that
// port and says its rank and world size (joinRendezvous); rank 0 answers
// every rank with the id once all have arrived, or names the ranks that did
// not. lib/Runtime/Rendezvous.cpp says whose designs this follows (NCCL's
// bootstrap, torch.distributed's TCPStore) and why it is not torchrun's
// store. The launch environment that selects it is in Communicator.h.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_RENDEZVOUS_H
#define MEMOPT_RUNTIME_RENDEZVOUS_H

#include <cstddef>
#include <string>

namespace memopt::rt {

/// Rank 0's side: listen(), then serve() once.
class RendezvousServer {
public:
  RendezvousServer() = default;
  RendezvousServer(const RendezvousServer &) = delete;
  RendezvousServer &operator=(const RendezvousServer &) = delete;
  ~RendezvousServer();

  /// Listens on every interface at `port` (0: a free port the system picks;
  /// port() says which). False with `error` when the port is taken.
  bool listen(int port, std::string &error);
  int port() const { return port_; }

  /// Waits until ranks 1 .. worldSize-1 have each connected and said hello
  /// (their rank and world size), then sends every one the `bytes` bytes of
  /// `id`. A hello with another world size, a rank outside the group or a
  /// rank already seen is answered with an error for that process (and noted
  /// in rank 0's error should the wait time out). False with an `error`
  /// naming the ranks that did not arrive within `timeoutSeconds`.
  bool serve(int worldSize, const void *id, size_t bytes, double timeoutSeconds,
             std::string &error);

private:
  int fd_ = -1;
  int port_ = 0;
};

/// Rank `rank`'s side: connects to `host`:`port` (retrying until rank 0
/// listens), says hello and receives the `bytes` bytes of the id into `id`.
/// False with `error` when rank 0 cannot be reached or does not answer
/// within `timeoutSeconds`, or refuses this rank (its message is passed on).
bool joinRendezvous(const std::string &host, int port, int rank, int worldSize,
                    double timeoutSeconds, void *id, size_t bytes,
                    std::string &error);

} // namespace memopt::rt

#endif // MEMOPT_RUNTIME_RENDEZVOUS_H
