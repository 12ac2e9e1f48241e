#pragma once
// The message types of the data path: Beast's fields and parsers over an ArenaAllocator, so that
// parsing and rewriting a head allocate from the request's arena (see core/arena.hpp). A
// default-constructed Fields uses the heap.
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/parser.hpp>

#include "sluice/core/arena.hpp"

namespace sluice::http {

using Allocator = ArenaAllocator<char>;
using Fields = boost::beast::http::basic_fields<Allocator>;
using RequestParser = boost::beast::http::parser<true, boost::beast::http::buffer_body, Allocator>;
using ResponseParser = boost::beast::http::parser<false, boost::beast::http::buffer_body, Allocator>;

}  // namespace sluice::http
