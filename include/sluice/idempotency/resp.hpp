#pragma once
// The Redis protocol (RESP2), through hiredis as a codec only: redisFormatCommandArgv encodes a
// command, redisReader parses replies from whatever bytes arrived. No hiredis I/O: the sockets
// are Asio's (redis_store.hpp), so no worker ever blocks on Redis.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct redisReader;

namespace sluice::idempotency {

struct Reply {
  enum class Type { string, array, integer, nil, status, error };
  Type type = Type::nil;
  std::string str;  // string, status, error
  long long integer = 0;
  std::vector<Reply> elements;
};

// The command as RESP bytes (an array of bulk strings).
std::string format_command(std::span<const std::string_view> args);

// Replies out of a byte stream. One per connection; not thread-safe.
class ReplyReader {
public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  // False when the reader refuses the bytes (a protocol error: drop the connection).
  bool feed(std::string_view bytes);
  // The next complete reply; nullopt when more bytes are needed. `error` is set on a protocol
  // error.
  std::optional<Reply> next(bool& error);

private:
  redisReader* reader_;
};

}  // namespace sluice::idempotency
