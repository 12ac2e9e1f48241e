#include "sluice/idempotency/resp.hpp"

#include <new>

#include <hiredis/hiredis.h>

namespace sluice::idempotency {

namespace {

Reply convert(const redisReply& r) {
  Reply out;
  switch (r.type) {
    case REDIS_REPLY_STRING: out.type = Reply::Type::string; break;
    case REDIS_REPLY_ARRAY: out.type = Reply::Type::array; break;
    case REDIS_REPLY_INTEGER: out.type = Reply::Type::integer; break;
    case REDIS_REPLY_STATUS: out.type = Reply::Type::status; break;
    case REDIS_REPLY_ERROR: out.type = Reply::Type::error; break;
    default: out.type = Reply::Type::nil; break;
  }
  if (r.str != nullptr) out.str.assign(r.str, r.len);
  out.integer = r.integer;
  for (std::size_t i = 0; i < r.elements; ++i) out.elements.push_back(convert(*r.element[i]));
  return out;
}

}  // namespace

std::string format_command(std::span<const std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* command = nullptr;
  const int n = redisFormatCommandArgv(&command, static_cast<int>(args.size()), argv.data(), lengths.data());
  if (n < 0 || command == nullptr) throw std::bad_alloc();
  std::string out(command, static_cast<std::size_t>(n));
  redisFreeCommand(command);
  return out;
}

ReplyReader::ReplyReader() : reader_(redisReaderCreate()) {
  if (reader_ == nullptr) throw std::bad_alloc();
}

ReplyReader::~ReplyReader() { redisReaderFree(reader_); }

bool ReplyReader::feed(std::string_view bytes) {
  return redisReaderFeed(reader_, bytes.data(), bytes.size()) == REDIS_OK;
}

std::optional<Reply> ReplyReader::next(bool& error) {
  void* raw = nullptr;
  error = redisReaderGetReply(reader_, &raw) != REDIS_OK;
  if (error || raw == nullptr) return std::nullopt;
  auto reply = convert(*static_cast<redisReply*>(raw));
  freeReplyObject(raw);
  return reply;
}

}  // namespace sluice::idempotency
