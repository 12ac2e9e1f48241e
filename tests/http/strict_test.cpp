#include "oracle/beast_fields.hpp"
#include "sluice/http/strict.hpp"

#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>

namespace {

namespace bhttp = boost::beast::http;
using sluice::http::HeadScan;
using sluice::http::Violation;
using Result = HeadScan::Result;
using namespace std::string_literals;

constexpr std::size_t k_max_head = 16 * 1024;
constexpr std::size_t k_max_target = 8 * 1024;

HeadScan scan_request(std::string_view bytes, std::size_t max_head = k_max_head,
                      std::size_t max_target = k_max_target) {
  return sluice::http::scan_request_head(bytes, max_head, max_target);
}

HeadScan scan_response(std::string_view bytes, std::size_t max_head = k_max_head) {
  return sluice::http::scan_response_head(bytes, max_head);
}

// The violation of an invalid head, or none (the test then fails on the comparison).
Violation request_violation(std::string_view bytes) {
  const auto scan = scan_request(bytes);
  return scan.result == Result::invalid ? scan.violation : Violation::none;
}

Violation response_violation(std::string_view bytes) {
  const auto scan = scan_response(bytes);
  return scan.result == Result::invalid ? scan.violation : Violation::none;
}

// A request head with the given field lines (each ending in CRLF).
std::string request_with(std::string_view field_lines) {
  return "GET / HTTP/1.1\r\nHost: a\r\n"s.append(field_lines).append("\r\n");
}

std::string response_with(std::string_view field_lines) {
  return "HTTP/1.1 200 OK\r\n"s.append(field_lines).append("\r\n");
}

// ---- request head: acceptance and incremental use -------------------------------------------

TEST(StrictScanRequest, AcceptsAPlainHead) {
  const std::string head = "GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
  const auto scan = scan_request(head);
  EXPECT_EQ(scan.result, Result::complete);
  EXPECT_EQ(scan.head_size, head.size());
  EXPECT_EQ(scan.head_start, 0U);
  EXPECT_EQ(scan.violation, Violation::none);
}

TEST(StrictScanRequest, AcceptsHttp10AndAbsoluteAuthorityAndAsteriskForms) {
  for (const auto* line : {"GET / HTTP/1.0", "GET http://a.example:80/x HTTP/1.1",
                           "CONNECT a.example:443 HTTP/1.1", "OPTIONS * HTTP/1.1"}) {
    EXPECT_EQ(scan_request(std::string(line) + "\r\nHost: a\r\n\r\n").result, Result::complete)
        << line;
  }
}

TEST(StrictScanRequest, HeadSizeExcludesBodyAndPipelinedBytes) {
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
  const auto scan = scan_request(head + "hello" + "GET / HTTP/1.1\r\n");
  EXPECT_EQ(scan.result, Result::complete);
  EXPECT_EQ(scan.head_size, head.size());
}

TEST(StrictScanRequest, EveryPrefixOfAValidHeadNeedsMore) {
  const std::string head = "\r\nPUT /x HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-A: \tb c\t\r\n\r\n";
  for (std::size_t n = 0; n < head.size(); ++n) {
    EXPECT_EQ(scan_request(head.substr(0, n)).result, Result::need_more) << n;
  }
  EXPECT_EQ(scan_request(head).result, Result::complete);
}

TEST(StrictScanRequest, EveryPrefixOfAnInvalidHeadNeedsMoreOrFindsTheSameViolation) {
  const std::string head = "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\0c\r\n\r\n"s;
  for (std::size_t n = 0; n <= head.size(); ++n) {
    const auto scan = scan_request(head.substr(0, n));
    if (scan.result != Result::need_more) {
      EXPECT_EQ(scan.violation, Violation::control_byte) << n;
    }
  }
  EXPECT_EQ(request_violation(head), Violation::control_byte);
}

TEST(StrictScanRequest, LeadingEmptyLinesAreSkipped) {
  // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request-line.
  const std::string head = "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
  const auto scan = scan_request(head);
  EXPECT_EQ(scan.result, Result::complete);
  EXPECT_EQ(scan.head_start, 4U);
  EXPECT_EQ(scan.head_size, head.size());
}

TEST(StrictScanRequest, OnlyEmptyLinesNeedMore) {
  EXPECT_EQ(scan_request("\r\n\r\n").result, Result::need_more);
  EXPECT_EQ(scan_request("").result, Result::need_more);
}

// ---- line endings ----------------------------------------------------------------------------

TEST(StrictScanRequest, BareLfIsRejected) {
  EXPECT_EQ(request_violation("GET / HTTP/1.1\nHost: a\r\n\r\n"), Violation::bare_lf);
  EXPECT_EQ(request_violation("GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n"), Violation::bare_lf);
  EXPECT_EQ(request_violation("GET / HTTP/1.1\r\nHost: a\r\n\n"), Violation::bare_lf);
  EXPECT_EQ(request_violation("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::bare_lf);
}

TEST(StrictScanRequest, BareCrIsRejected) {
  EXPECT_EQ(request_violation("GET / HTTP/1.1\rHost: a\r\n\r\n"), Violation::bare_cr);
  EXPECT_EQ(request_violation("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n"), Violation::bare_cr);
  EXPECT_EQ(request_violation("GET / HTTP/1.1\r\nHost: a\r\n\rX\r\n"), Violation::bare_cr);
  EXPECT_EQ(request_violation("\rGET / HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::bare_cr);
}

TEST(StrictScanRequest, CrAtTheEndOfTheBytesNeedsMore) {
  EXPECT_EQ(scan_request("GET / HTTP/1.1\r\nHost: a\r").result, Result::need_more);
  EXPECT_EQ(scan_request("GET / HTTP/1.1\r\nHost: a\r\n\r").result, Result::need_more);
}

// ---- field lines -----------------------------------------------------------------------------

TEST(StrictScanRequest, ControlByteInValueIsRejected) {
  EXPECT_EQ(request_violation(request_with("X: b\0c\r\n"s)), Violation::control_byte);
  EXPECT_EQ(request_violation(request_with("X: \x01\r\n")), Violation::control_byte);
  EXPECT_EQ(request_violation(request_with("X: a\x1b[0m\r\n")), Violation::control_byte);
  EXPECT_EQ(request_violation(request_with("X: a\x1f\r\n")), Violation::control_byte);
}

TEST(StrictScanRequest, DelInValueIsABadFieldValue) {
  // RFC 9110 §5.5: field-vchar = VCHAR / obs-text; DEL is neither.
  EXPECT_EQ(request_violation(request_with("X: a\x7f\r\n")), Violation::bad_field_value);
}

TEST(StrictScanRequest, HtabSpaceAndObsTextInValueAreAccepted) {
  EXPECT_EQ(scan_request(request_with("X: a\tb c \xe9\xff\x80\r\n")).result, Result::complete);
  EXPECT_EQ(scan_request(request_with("X:\r\n")).result, Result::complete);  // empty value
}

TEST(StrictScanRequest, ObsFoldIsRejected) {
  // RFC 9112 §5.2: a server MAY reject obs-fold with 400.
  EXPECT_EQ(request_violation(request_with("X: a\r\n b\r\n")), Violation::obs_fold);
  EXPECT_EQ(request_violation(request_with("X: a\r\n\tb\r\n")), Violation::obs_fold);
}

TEST(StrictScanRequest, WhitespaceBeforeTheFirstFieldIsRejected) {
  // RFC 9112 §2.2: whitespace between the start-line and the first field line.
  EXPECT_EQ(request_violation("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), Violation::obs_fold);
}

TEST(StrictScanRequest, WhitespaceBeforeColonIsRejected) {
  // RFC 9112 §5.1: MUST be rejected with 400.
  EXPECT_EQ(request_violation(request_with("Content-Length : 5\r\n")),
            Violation::space_before_colon);
  EXPECT_EQ(request_violation(request_with("Content-Length\t: 5\r\n")),
            Violation::space_before_colon);
}

TEST(StrictScanRequest, FieldNameMustBeANonEmptyToken) {
  EXPECT_EQ(request_violation(request_with(": a\r\n")), Violation::bad_field_name);
  EXPECT_EQ(request_violation(request_with("X(y): a\r\n")), Violation::bad_field_name);
  EXPECT_EQ(request_violation(request_with("X@y: a\r\n")), Violation::bad_field_name);
  EXPECT_EQ(request_violation(request_with("X\xe9: a\r\n")), Violation::bad_field_name);
  EXPECT_EQ(request_violation(request_with("X\0: a\r\n"s)), Violation::bad_field_name);
  EXPECT_EQ(request_violation(request_with("Two words: a\r\n")), Violation::bad_field_name);
  EXPECT_EQ(request_violation(request_with("no-colon\r\n")), Violation::bad_field_name);
  EXPECT_EQ(scan_request(request_with("!#$%&'*+-.^_`|~09azAZ: a\r\n")).result, Result::complete);
}

// ---- request line ----------------------------------------------------------------------------

TEST(StrictScanRequest, MethodMustBeAToken) {
  EXPECT_EQ(request_violation("G(T / HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::bad_method);
  EXPECT_EQ(request_violation("GE\tT / HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::bad_method);
  EXPECT_EQ(request_violation("G\xc3\x89T / HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::bad_method);
  EXPECT_EQ(scan_request("get / HTTP/1.1\r\nHost: a\r\n\r\n").result, Result::complete);
}

TEST(StrictScanRequest, RequestLineNeedsThreePartsAndSingleSpaces) {
  for (const auto* line :
       {" GET / HTTP/1.1", "GET  / HTTP/1.1", "GET / HTTP/1.1 ", "GET /", "GET", "GET "}) {
    EXPECT_EQ(request_violation(std::string(line) + "\r\nHost: a\r\n\r\n"),
              Violation::bad_request_line)
        << '"' << line << '"';
  }
}

TEST(StrictScanRequest, TargetMustBeVisibleAscii) {
  EXPECT_EQ(request_violation("GET /\xe9 HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::bad_target);
  EXPECT_EQ(request_violation("GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::bad_target);
  EXPECT_EQ(request_violation("GET /\ta HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::bad_target);
  EXPECT_EQ(request_violation("GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n"s), Violation::bad_target);
}

TEST(StrictScanRequest, OnlyHttp10And11AreAccepted) {
  for (const auto* version : {"HTTP/1.2", "HTTP/2.0", "http/1.1", "HTTP/11", "HTTP/1.10", "HTTP/1.",
                              "HTTX/1.1", "HTTP/1.1x"}) {
    EXPECT_EQ(request_violation("GET / "s + version + "\r\nHost: a\r\n\r\n"),
              Violation::bad_version)
        << version;
  }
}

// RFC 9112 §3.2.4: asterisk-form only for OPTIONS.
TEST(StrictScanRequest, AsteriskFormOnlyForOptions) {
  EXPECT_EQ(request_violation("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::asterisk_form);
  EXPECT_EQ(request_violation("POST * HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::asterisk_form);
  EXPECT_EQ(scan_request("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").result, Result::complete);
  EXPECT_EQ(scan_request("GET /* HTTP/1.1\r\nHost: a\r\n\r\n").result, Result::complete);
}

// RFC 9110 §7.1 / RFC 3986 §3.5: a fragment is not part of a request-target.
TEST(StrictScanRequest, FragmentInTargetIsRejectedAtItsByte) {
  EXPECT_EQ(request_violation("GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n"), Violation::fragment);
  EXPECT_EQ(request_violation("GET http://a/#"), Violation::fragment);  // no need to wait
  EXPECT_EQ(scan_request("GET /a%23b HTTP/1.1\r\nHost: a\r\n\r\n").result, Result::complete);
}

TEST(StrictScanRequest, Http2PrefaceIsRejected) {
  EXPECT_EQ(request_violation("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Violation::bad_version);
  // Even before the rest of the preface arrives.
  EXPECT_EQ(request_violation("PRI * HTTP/2"), Violation::bad_version);
}

// ---- limits ----------------------------------------------------------------------------------

TEST(StrictScanRequest, TargetLongerThanMaxTargetIsUriTooLong) {
  const std::string ok_target = "/" + std::string(99, 'a');
  EXPECT_EQ(
      scan_request("GET " + ok_target + " HTTP/1.1\r\nHost: a\r\n\r\n", k_max_head, 100).result,
      Result::complete);
  const auto scan =
      scan_request("GET " + ok_target + "a HTTP/1.1\r\nHost: a\r\n\r\n", k_max_head, 100);
  EXPECT_EQ(scan.result, Result::invalid);
  EXPECT_EQ(scan.violation, Violation::uri_too_long);
}

TEST(StrictScanRequest, UriTooLongIsDetectedBeforeTheLineEnds) {
  const auto scan = scan_request("GET /" + std::string(100, 'a'), k_max_head, 100);
  EXPECT_EQ(scan.result, Result::invalid);
  EXPECT_EQ(scan.violation, Violation::uri_too_long);
}

TEST(StrictScanRequest, HeadLargerThanMaxHeadIsTooLarge) {
  const std::string head = request_with("X: " + std::string(100, 'v') + "\r\n");
  EXPECT_EQ(scan_request(head, head.size()).result, Result::complete);  // exactly at the limit
  const auto scan = scan_request(head, head.size() - 1);
  EXPECT_EQ(scan.result, Result::invalid);
  EXPECT_EQ(scan.violation, Violation::head_too_large);
}

TEST(StrictScanRequest, HeadTooLargeIsDetectedBeforeTheHeadEnds) {
  const std::string partial = "GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(200, 'v');
  EXPECT_EQ(scan_request(partial, 1024).result, Result::need_more);
  const auto scan = scan_request(partial, 100);
  EXPECT_EQ(scan.result, Result::invalid);
  EXPECT_EQ(scan.violation, Violation::head_too_large);
}

TEST(StrictScanRequest, LeadingEmptyLinesCountTowardMaxHead) {
  std::string padded;
  for (int i = 0; i < 25; ++i) padded += "\r\n";
  padded += "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  EXPECT_EQ(scan_request(padded, padded.size()).result, Result::complete);
  EXPECT_EQ(scan_request(padded, padded.size() - 1).violation, Violation::head_too_large);
}

// ---- response head ---------------------------------------------------------------------------

TEST(StrictScanResponse, AcceptsStatusLinesWithAndWithoutReason) {
  for (const auto* line : {"HTTP/1.1 200 OK", "HTTP/1.0 404 Not Found", "HTTP/1.1 204 ",
                           "HTTP/1.1 100 Continue", "HTTP/1.1 599 x\ty \xe9"}) {
    const std::string head = std::string(line) + "\r\nContent-Length: 0\r\n\r\n";
    const auto scan = scan_response(head + "body");
    EXPECT_EQ(scan.result, Result::complete) << line;
    EXPECT_EQ(scan.head_size, head.size()) << line;
  }
}

TEST(StrictScanResponse, StatusWithoutSpaceBeforeEmptyReasonIsRejected) {
  // RFC 9112 §4 requires the SP; Beast rejects it too, so tolerating it would mean rewriting.
  EXPECT_EQ(response_violation("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"),
            Violation::bad_status_line);
}

TEST(StrictScanResponse, StatusCodeMustBeThreeDigitsIn100To599) {
  for (const auto* code : {"000", "099", "600", "999", "20 ", "2x0", "-20"}) {
    EXPECT_EQ(response_violation("HTTP/1.1 "s + code + " X\r\n\r\n"), Violation::bad_status_line)
        << code;
  }
}

TEST(StrictScanResponse, OnlyHttp10And11AreAccepted) {
  EXPECT_EQ(response_violation("HTTP/2.0 200 OK\r\n\r\n"), Violation::bad_version);
  EXPECT_EQ(response_violation("HTTP/1.2 200 OK\r\n\r\n"), Violation::bad_version);
  EXPECT_EQ(response_violation("HTTP/1.10 200 OK\r\n\r\n"), Violation::bad_version);
}

TEST(StrictScanResponse, NotAStatusLineIsRejected) {
  EXPECT_EQ(response_violation("http/1.1 200 OK\r\n\r\n"), Violation::bad_status_line);
  EXPECT_EQ(response_violation("<html>\r\n\r\n"), Violation::bad_status_line);
  EXPECT_EQ(response_violation("HTTP/1.1\r\n\r\n"), Violation::bad_status_line);
  // No leading empty lines before a status line: that tolerance is for servers only.
  EXPECT_EQ(response_violation("\r\nHTTP/1.1 200 OK\r\n\r\n"), Violation::bad_status_line);
}

TEST(StrictScanResponse, ControlByteInReasonIsRejected) {
  EXPECT_EQ(response_violation("HTTP/1.1 200 O\0K\r\n\r\n"s), Violation::control_byte);
  EXPECT_EQ(response_violation("HTTP/1.1 200 O\x7fK\r\n\r\n"), Violation::bad_status_line);
  EXPECT_EQ(response_violation("HTTP/1.1 200 OK\nX: a\r\n\r\n"), Violation::bare_lf);
}

TEST(StrictScanResponse, FieldRulesApplyToResponses) {
  EXPECT_EQ(response_violation(response_with("X: a\r\n b\r\n")), Violation::obs_fold);
  EXPECT_EQ(response_violation(response_with("X : a\r\n")), Violation::space_before_colon);
  EXPECT_EQ(response_violation(response_with("X: a\0\r\n"s)), Violation::control_byte);
  EXPECT_EQ(response_violation(response_with("X: a\rb\r\n")), Violation::bare_cr);
}

TEST(StrictScanResponse, EveryPrefixOfAValidHeadNeedsMore) {
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
  for (std::size_t n = 0; n < head.size(); ++n) {
    EXPECT_EQ(scan_response(head.substr(0, n)).result, Result::need_more) << n;
  }
}

TEST(StrictScanResponse, HeadLargerThanMaxHeadIsTooLarge) {
  const std::string head = response_with("X: " + std::string(100, 'v') + "\r\n");
  EXPECT_EQ(scan_response(head, head.size()).result, Result::complete);
  EXPECT_EQ(scan_response(head, head.size() - 1).violation, Violation::head_too_large);
  EXPECT_EQ(scan_response(head.substr(0, 60), 50).violation, Violation::head_too_large);
}

// ---- framing fields --------------------------------------------------------------------------

sluice::http::Fields fields_of(
    std::initializer_list<std::pair<std::string_view, std::string_view>> lines) {
  sluice::http::Fields fields;
  for (const auto& [name, value] : lines) fields.insert(name, value);
  return fields;
}

Violation check_request(std::initializer_list<std::pair<std::string_view, std::string_view>> lines,
                        unsigned version = 11) {
  return sluice::http::check_request_fields(fields_of(lines), version);
}

Violation check_response(std::initializer_list<std::pair<std::string_view, std::string_view>> lines,
                         unsigned version = 11) {
  return sluice::http::check_response_fields(fields_of(lines), version);
}

TEST(StrictFieldsRequest, AcceptsPlainRequests) {
  EXPECT_EQ(check_request({{"Host", "a"}}), Violation::none);
  EXPECT_EQ(check_request({{"Host", "a"}, {"Content-Length", "5"}}), Violation::none);
  EXPECT_EQ(check_request({{"Host", "a"}, {"Transfer-Encoding", "chunked"}}), Violation::none);
  EXPECT_EQ(check_request({{"Host", "a"}, {"Transfer-Encoding", "Chunked"}}), Violation::none);
}

TEST(StrictFieldsRequest, ContentLengthWithTransferEncodingIsRejected) {
  // RFC 9112 §6.1: ought to be handled as an error (request smuggling, §11.2).
  EXPECT_EQ(
      check_request({{"Host", "a"}, {"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}}),
      Violation::content_length_with_transfer_encoding);
  EXPECT_EQ(check_request({{"Host", "a"}, {"Transfer-Encoding", "gzip"}, {"Content-Length", "5"}}),
            Violation::content_length_with_transfer_encoding);
}

TEST(StrictFieldsRequest, ContentLengthMustBeDigits) {
  for (const auto* value : {"", "+5", "-5", "0x5", "5 5", "5a", "5.0", "\xd9\xa5"}) {
    EXPECT_EQ(check_request({{"Host", "a"}, {"Content-Length", value}}),
              Violation::bad_content_length)
        << '"' << value << '"';
  }
  EXPECT_EQ(check_request({{"Host", "a"}, {"Content-Length", "0005"}}), Violation::none);
}

TEST(StrictFieldsRequest, ContentLengthAbove2To63Minus1IsRejected) {
  EXPECT_EQ(check_request({{"Host", "a"}, {"Content-Length", "9223372036854775807"}}),
            Violation::none);
  for (const auto* value : {"9223372036854775808", "18446744073709551615", "18446744073709551616",
                            "99999999999999999999999"}) {
    EXPECT_EQ(check_request({{"Host", "a"}, {"Content-Length", value}}),
              Violation::bad_content_length)
        << value;
  }
}

TEST(StrictFieldsRequest, SeveralContentLengthsAreRejectedEvenWhenEqual) {
  EXPECT_EQ(check_request({{"Host", "a"}, {"Content-Length", "5"}, {"Content-Length", "5"}}),
            Violation::bad_content_length);
  EXPECT_EQ(check_request({{"Host", "a"}, {"Content-Length", "5, 5"}}),
            Violation::bad_content_length);
}

TEST(StrictFieldsRequest, TransferEncodingOtherThanChunkedIsRejected) {
  for (const auto* value : {"gzip", "xchunked", "chunkedx", "chunked, identity",
                            "chunked;q=1", "chunked, chunked", "chunked\t,", "chunk ed", ""}) {
    EXPECT_EQ(check_request({{"Host", "a"}, {"Transfer-Encoding", value}}),
              Violation::bad_transfer_encoding)
        << '"' << value << '"';
  }
}

// RFC 9112 §6.1: a well-formed coding before chunked is one we do not handle: 501.
TEST(StrictFieldsRequest, CodingBeforeChunkedIsNotImplemented) {
  for (const auto* value : {"gzip, chunked", "deflate, chunked", "x-custom,chunked"}) {
    const auto v = check_request({{"Host", "a"}, {"Transfer-Encoding", value}});
    EXPECT_EQ(v, Violation::unsupported_coding) << value;
    EXPECT_EQ(sluice::http::status_for(v), 501u);
  }
  EXPECT_EQ(check_request({{"Host", "a"}, {"Transfer-Encoding", "chunked, gzip"}}),
            Violation::bad_transfer_encoding);
}

// nginx drops them; a backend folding "_" into "-" would read them as framing.
TEST(StrictFieldsRequest, UnderscoreVariantsOfFramingFieldsAreRejected) {
  for (const auto* name : {"Transfer_Encoding", "Content_Length", "content_length",
                           "TRANSFER_ENCODING"}) {
    EXPECT_EQ(check_request({{"Host", "a"}, {name, "5"}}), Violation::framing_field_variant)
        << name;
  }
  EXPECT_EQ(check_request({{"Host", "a"}, {"X_Content_Length", "5"}}), Violation::none);
  EXPECT_EQ(check_request({{"Host", "a"}, {"Content_Type", "a"}}), Violation::none);
}

TEST(StrictFieldsRequest, SeveralTransferEncodingLinesAreRejected) {
  EXPECT_EQ(
      check_request(
          {{"Host", "a"}, {"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}}),
      Violation::bad_transfer_encoding);
}

TEST(StrictFieldsRequest, TransferEncodingInHttp10IsRejected) {
  // RFC 9112 §6.1: the framing of an HTTP/1.0 message with TE MUST be treated as faulty.
  EXPECT_EQ(check_request({{"Transfer-Encoding", "chunked"}}, 10),
            Violation::bad_transfer_encoding);
}

TEST(StrictFieldsRequest, Http11WithoutHostIsRejected) {
  EXPECT_EQ(check_request({{"Content-Length", "0"}}), Violation::missing_host);
  EXPECT_EQ(check_request({}, 10), Violation::none);  // HTTP/1.0: Host is optional
}

TEST(StrictFieldsRequest, RepeatedHostIsRejectedInAnyVersion) {
  EXPECT_EQ(check_request({{"Host", "a"}, {"Host", "a"}}), Violation::repeated_host);
  EXPECT_EQ(check_request({{"Host", "a"}, {"host", "b"}}, 10), Violation::repeated_host);
}

TEST(StrictFieldsRequest, HostMustBeUriHostAndPort) {
  for (const auto* host : {"", "a.example", "a.example:8080", "a.example:", "127.0.0.1:80", "[::1]",
                           "[::1]:443", "[fe80::1%25eth0]", "xn--bcher-kva.example", "a%2Db",
                           "under_score", "sub!$&'()*+,;=delims"}) {
    EXPECT_EQ(check_request({{"Host", host}}), Violation::none) << host;
  }
  for (const auto* host : {"a b", "a/b", "a@b", "a?b", "a#b", "a:8x", "a:80:80", "[::1", "[]",
                           "[::1]x", "%zz", "a%2", "\xe9.example", "a\"b"}) {
    EXPECT_EQ(check_request({{"Host", host}}), Violation::bad_host) << host;
  }
}

TEST(StrictFieldsResponse, FinalChunkedAfterOtherCodingsIsAccepted) {
  for (const auto* value : {"chunked", "CHUNKED", "gzip, chunked", "gzip,chunked",
                            "gzip, , chunked", "deflate, gzip, chunked"}) {
    EXPECT_EQ(check_response({{"Transfer-Encoding", value}}), Violation::none) << value;
  }
}

TEST(StrictFieldsResponse, TransferEncodingWithoutASingleFinalChunkedIsRejected) {
  for (const auto* value : {"gzip", "chunked, gzip", "chunked, chunked", "xchunked", "chunked;q=1",
                            "gzip chunked", "", ","}) {
    EXPECT_EQ(check_response({{"Transfer-Encoding", value}}), Violation::bad_transfer_encoding)
        << '"' << value << '"';
  }
  EXPECT_EQ(check_response({{"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}}),
            Violation::bad_transfer_encoding);
  EXPECT_EQ(check_response({{"Transfer-Encoding", "chunked"}}, 10),
            Violation::bad_transfer_encoding);
}

TEST(StrictFieldsResponse, ContentLengthRulesApplyToResponses) {
  EXPECT_EQ(check_response({{"Content-Length", "2"}}), Violation::none);
  EXPECT_EQ(check_response({{"Content-Length", "2"}, {"Transfer-Encoding", "chunked"}}),
            Violation::content_length_with_transfer_encoding);
  EXPECT_EQ(check_response({{"Content-Length", "2"}, {"Content-Length", "2"}}),
            Violation::bad_content_length);
  EXPECT_EQ(check_response({{"Content-Length", "2x"}}), Violation::bad_content_length);
}

TEST(StrictFieldsResponse, HostIsNotRequired) {
  EXPECT_EQ(sluice::http::check_response_fields(sluice::http::Fields{}), Violation::none);
}

// ---- reasons and statuses --------------------------------------------------------------------

TEST(StrictDescribe, ReasonsAreShortAndFitAHeaderValue) {
  EXPECT_EQ(sluice::http::describe(Violation::bare_lf), "bare LF");
  EXPECT_EQ(sluice::http::describe(Violation::obs_fold), "obs-fold");
  EXPECT_EQ(sluice::http::describe(Violation::content_length_with_transfer_encoding),
            "content-length with transfer-encoding");
  EXPECT_EQ(sluice::http::describe(Violation::bad_content_length), "bad content-length");
  EXPECT_EQ(sluice::http::describe(Violation::missing_host), "missing host");
  EXPECT_EQ(sluice::http::describe(Violation::uri_too_long), "uri too long");
  EXPECT_EQ(sluice::http::describe(Violation::head_too_large), "header too large");
  for (int v = 0; v <= static_cast<int>(Violation::bad_host); ++v) {
    const auto reason = sluice::http::describe(static_cast<Violation>(v));
    EXPECT_FALSE(reason.empty()) << v;
    EXPECT_NE(reason, "unknown") << v;
    for (const char c : reason) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << v;
  }
}

TEST(StrictDescribe, StatusIs414For431ForOr400) {
  EXPECT_EQ(sluice::http::status_for(Violation::uri_too_long), 414U);
  EXPECT_EQ(sluice::http::status_for(Violation::head_too_large), 431U);
  for (const auto v : {Violation::bare_lf, Violation::bad_content_length, Violation::missing_host,
                       Violation::bad_chunk, Violation::bad_host, Violation::bad_version}) {
    EXPECT_EQ(sluice::http::status_for(v), 400U) << sluice::http::describe(v);
  }
}

// ---- together with Beast, as the proxy uses them ---------------------------------------------

struct Parsed {
  boost::system::error_code ec;
  std::size_t used = 0;
  Violation violation = Violation::none;
};

// scan -> feed bytes[head_start, head_size) to Beast -> check, as the downstream session does.
Parsed scan_parse_check(std::string_view bytes) {
  const auto scan = scan_request(bytes);
  EXPECT_EQ(scan.result, Result::complete);
  const auto head = bytes.substr(scan.head_start, scan.head_size - scan.head_start);
  sluice::http::RequestParser parser;
  parser.header_limit(static_cast<std::uint32_t>(k_max_head * 2));
  parser.eager(false);
  Parsed out;
  out.used = parser.put(boost::asio::buffer(head.data(), head.size()), out.ec);
  if (out.ec) {
    out.violation = sluice::http::violation_from_parser_error(out.ec, head);
  } else {
    EXPECT_TRUE(parser.is_header_done());
    out.violation = sluice::http::check_request_fields(parser.get(), parser.get().version());
  }
  return out;
}

TEST(StrictPipeline, BeastConsumesExactlyTheScannedHead) {
  const std::string head = "\r\nPOST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n";
  const auto parsed = scan_parse_check(head + "abc");
  EXPECT_FALSE(parsed.ec);
  EXPECT_EQ(parsed.used, head.size() - 2);
  EXPECT_EQ(parsed.violation, Violation::none);
}

TEST(StrictPipeline, MissingHostIsFoundAfterBeast) {
  EXPECT_EQ(scan_parse_check("GET / HTTP/1.1\r\n\r\n").violation, Violation::missing_host);
}

TEST(StrictPipeline, FramingConflictsBeastRejectsMapToOurViolations) {
  // Beast rejects these itself, naming the second field; the head says what it really was.
  EXPECT_EQ(scan_parse_check(request_with("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"))
                .violation,
            Violation::content_length_with_transfer_encoding);
  EXPECT_EQ(scan_parse_check(request_with("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"))
                .violation,
            Violation::content_length_with_transfer_encoding);
  EXPECT_EQ(scan_parse_check(request_with("Content-Length: 5\r\nContent-Length: 6\r\n")).violation,
            Violation::bad_content_length);
  EXPECT_EQ(
      scan_parse_check(request_with("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"))
          .violation,
      Violation::bad_transfer_encoding);
}

TEST(StrictPipeline, FramingBeastAcceptsIsCaughtByTheCheck) {
  EXPECT_EQ(
      scan_parse_check(request_with("Transfer-Encoding: gzip\r\nContent-Length: 5\r\n")).violation,
      Violation::content_length_with_transfer_encoding);
  EXPECT_EQ(scan_parse_check(request_with("Content-Length: 5\r\nContent-Length: 5\r\n")).violation,
            Violation::bad_content_length);
  EXPECT_EQ(scan_parse_check(request_with("Transfer-Encoding: chunked, identity\r\n")).violation,
            Violation::bad_transfer_encoding);
  // OWS is not part of the value (RFC 9110 §5.5): Beast trims it and the check sees "chunked".
  EXPECT_EQ(scan_parse_check(request_with("Transfer-Encoding: chunked\t\r\n")).violation,
            Violation::none);
}

TEST(StrictParserError, ChunkErrorsAreBadChunk) {
  using sluice::http::violation_from_parser_error;
  EXPECT_EQ(violation_from_parser_error(bhttp::error::bad_chunk), Violation::bad_chunk);
  EXPECT_EQ(violation_from_parser_error(bhttp::error::bad_chunk_extension), Violation::bad_chunk);
}

TEST(StrictParserError, FramingErrorsWithoutHeadKeepBeastsWord) {
  using sluice::http::violation_from_parser_error;
  EXPECT_EQ(violation_from_parser_error(bhttp::error::multiple_content_length),
            Violation::bad_content_length);
  EXPECT_EQ(violation_from_parser_error(bhttp::error::bad_transfer_encoding),
            Violation::bad_transfer_encoding);
}

TEST(StrictParserError, OtherErrorsAreNotViolations) {
  using sluice::http::violation_from_parser_error;
  EXPECT_EQ(violation_from_parser_error(bhttp::error::header_limit), Violation::head_too_large);
  EXPECT_EQ(violation_from_parser_error(bhttp::error::end_of_stream), Violation::none);
  EXPECT_EQ(violation_from_parser_error(bhttp::error::body_limit), Violation::none);
  EXPECT_EQ(violation_from_parser_error(boost::system::error_code{}), Violation::none);
}

}  // namespace
