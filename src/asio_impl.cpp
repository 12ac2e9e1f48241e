// The one translation unit that compiles Asio and Beast (separate compilation):
// every other file sees only declarations, so a one-file change rebuilds in seconds.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
