// The external headers that most of sluice's translation units include, compiled once per build
// (CMakeLists.txt: sluice_precompiled) instead of parsed again by every file. Only third-party
// headers belong here, and nothing else in this directory: a sluice header would be reachable
// from every module and undo the layering (each module sees only the include roots of the
// modules it depends on).
#pragma once

#include <fmt/core.h>
#include <spdlog/spdlog.h>

// libfmt.so instantiates the formatting engine for char; without this declaration every file
// that logs compiles its own copy (a third of a logging file's object code and compile time).
// The declaration is fmt 9's (Debian 12); another fmt simply compiles its copies as before.
#if FMT_VERSION >= 90000 && FMT_VERSION < 100000 && !defined(FMT_HEADER_ONLY)
FMT_BEGIN_NAMESPACE
namespace detail {
extern template void vformat_to<char>(buffer<char>&, string_view,
                                      basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);
}  // namespace detail
FMT_END_NAMESPACE
#endif

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/status.hpp>
