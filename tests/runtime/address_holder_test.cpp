#include "sluice/runtime/address_holder.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace sluice {
namespace {

using tcp = boost::asio::ip::tcp;

tcp::endpoint ep(const char* address, unsigned short port) {
  return {boost::asio::ip::make_address(address), port};
}

// Lines as the kernel writes them (little-endian: 127.0.0.1 is 0100007F), port 8080 = 1F90.
constexpr const char* v4_listen =
    "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 424242 1 0000000000000000 100 0 0 10 0";
constexpr const char* v4_wildcard_listen =
    "   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 515151 1 0000000000000000 100 0 0 10 0";
constexpr const char* v4_established =
    "   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 616161 1 0000000000000000 20 4 30 10 -1";
constexpr const char* v6_loopback_listen =
    "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 717171 1 0000000000000000 100 0 0 10 0";

TEST(AddressHolder, ListeningLineMatchesItsAddressAndOverlappingWildcards) {
  if (htonl(1) == 1) GTEST_SKIP() << "the sample lines are a little-endian kernel's";
  EXPECT_EQ(listening_inode(v4_listen, ep("127.0.0.1", 8080)), 424242u);
  EXPECT_EQ(listening_inode(v4_listen, ep("0.0.0.0", 8080)), 424242u);
  EXPECT_EQ(listening_inode(v4_wildcard_listen, ep("127.0.0.1", 8080)), 515151u);
  EXPECT_EQ(listening_inode(v4_listen, ep("127.0.0.2", 8080)), std::nullopt);
  EXPECT_EQ(listening_inode(v4_listen, ep("127.0.0.1", 8081)), std::nullopt);
  EXPECT_EQ(listening_inode(v4_established, ep("127.0.0.1", 8080)), std::nullopt);  // not LISTEN
  EXPECT_EQ(listening_inode(v6_loopback_listen, ep("::1", 8080)), 717171u);
  EXPECT_EQ(listening_inode(v6_loopback_listen, ep("127.0.0.1", 8080)), std::nullopt);
  EXPECT_EQ(listening_inode("  sl  local_address rem_address   st tx_queue", ep("127.0.0.1", 8080)),
            std::nullopt);  // the header line
}

TEST(AddressHolder, AV6WildcardMayBeDualStack) {
  EXPECT_TRUE(addresses_overlap(ep("::", 80), ep("10.0.0.1", 80)));
  EXPECT_FALSE(addresses_overlap(ep("0.0.0.0", 80), ep("::1", 80)));
  EXPECT_FALSE(addresses_overlap(ep("::", 80), ep("10.0.0.1", 81)));
}

TEST(AddressHolder, ProbeFindsAListenerAndNamesThisProcessAsItsHolder) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on), 0);
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const auto where = ep("127.0.0.1", ntohs(a.sin_port));
  EXPECT_FALSE(probe_address(where)) << "bound but not listening: free for a listener";
  ASSERT_EQ(::listen(fd, 4), 0);
  EXPECT_EQ(probe_address(where), boost::asio::error::address_in_use);
  EXPECT_EQ(address_holder(where), "sluice_tests (pid " + std::to_string(::getpid()) + ")");
  ::close(fd);
  EXPECT_FALSE(probe_address(where)) << "nothing left once the listener is closed";
  EXPECT_EQ(address_holder(where), std::nullopt);
}

}  // namespace
}  // namespace sluice
