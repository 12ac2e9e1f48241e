#pragma once
// A section's keys, declared once: each row names a key, the member it fills, its type, bounds,
// reload class and one line of documentation; the default is the member's initializer in
// config.hpp. One walker (src/config/reader.cpp) reads every row the same way: type checks,
// bounds, unknown keys with a did-you-mean, the effective value `check --diff` compares. A key
// whose value needs its own grammar (addresses, header rules, tables of tables) is a `custom` row:
// its `parse` (or its section's reader, for a sub-table) reads it, and the walker still knows its
// name, member, class and how to print it. Code that needs a key's node or path looks the row up
// by its member (Read::at<&Section::member>()), so the name is written only in its row.
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <toml++/toml.h>

#include "sluice/config/config.hpp"

namespace sluice::config {

class Reader;

enum class KeyType : std::uint8_t { string, boolean, integer, duration, size, number, choice, strings, custom };

// The member of a section object, type-erased: every row bound to a member has `ref`, and its
// address is the row's identity (KeySpec::is).
template <auto M>
void* key_spec_ref(void* section);

// Past a day a timeout is a typo ("10h" for "10s"), and a bound keeps `now() + timeout` far
// from overflowing the clock's representation.
inline constexpr Duration max_timeout = std::chrono::hours(24);

struct KeySpec {
  std::string_view name;
  KeyType type = KeyType::custom;
  std::string_view doc;
  Reload reload = Reload::live;
  // The member inside the section object; which one is set follows `type`.
  void* (*ref)(void*) = nullptr;                 // every row bound to a member; also its identity
  std::int64_t (*get)(const void*) = nullptr;    // integer, choice
  void (*set)(void*, std::int64_t) = nullptr;    // integer, choice
  std::string (*format)(const void*) = nullptr;  // custom: the effective value as TOML; nullptr = not recorded
  // custom: reads the value at `node` (present in the file) into the section object.
  void (*parse)(Reader&, const toml::node& node, const std::string& path, void* section) = nullptr;
  std::int64_t min = 0;  // integer
  std::int64_t max = 0;
  std::uint64_t size_min = 0;  // size, in bytes
  std::uint64_t size_max = std::numeric_limits<std::uint64_t>::max();
  double number_min = 0;  // number
  double number_max = 0;
  bool zero_allowed = false;  // duration
  Duration duration_max = max_timeout;
  std::span<const std::string_view> words;  // choice: the values, in the order of the member's enum
  std::string_view kind;                    // choice: "log level" in "unknown log level 'x'"; "" = the name
  std::string_view below_min_hint;          // integer: appended to the message of a too small value
  // A rule on the value read (it may read the section's other members): "" when it holds, else
  // the message, reported at the key. Runs when the key is in the file and valid; with
  // `check_always`, also at the default (reported at the section).
  std::string (*check)(const void*) = nullptr;
  bool check_always = false;
  // Shown on its owner's one-line summary (a route's match, upstream and admission), which
  // `check --diff` compares whole: not listed again key by key (in_route_summary).
  bool in_summary = false;
  // A section read at its defaults when absent: `parse` runs on an empty table then.
  bool always = false;
  // A required key: what it is, for "required key is missing (WHAT)"; "" = optional.
  std::string_view required;
  // For the generated docs, where the type or bounds alone do not say it (custom rows mostly).
  std::string_view type_doc;
  std::string_view bounds_doc;
  std::string_view default_doc;

  constexpr KeySpec restart() const {
    KeySpec k = *this;
    k.reload = Reload::restart;
    return k;
  }
  constexpr KeySpec hint(std::string_view text) const {
    KeySpec k = *this;
    k.below_min_hint = text;
    return k;
  }
  constexpr KeySpec rule(std::string (*f)(const void*), bool always = false) const {
    KeySpec k = *this;
    k.check = f;
    k.check_always = always;
    return k;
  }
  constexpr KeySpec at_most(Duration d) const {
    KeySpec k = *this;
    k.duration_max = d;
    return k;
  }
  constexpr KeySpec by_default() const {
    KeySpec k = *this;
    k.always = true;
    return k;
  }
  constexpr KeySpec needed(std::string_view what) const {
    KeySpec k = *this;
    k.required = what;
    return k;
  }
  constexpr KeySpec summary() const {
    KeySpec k = *this;
    k.in_summary = true;
    return k;
  }
  // type, bounds and default as the docs show them; "" keeps what the row derives.
  constexpr KeySpec docs(std::string_view type, std::string_view bounds = {}, std::string_view def = {}) const {
    KeySpec k = *this;
    k.type_doc = type;
    k.bounds_doc = bounds;
    k.default_doc = def;
    return k;
  }
  template <auto M>
  bool is() const {
    return ref == static_cast<void* (*)(void*)>(&key_spec_ref<M>);
  }
};

using KeyTable = std::span<const KeySpec>;

// The name of the row filling member M: code that shows a key's name takes it from its row.
template <auto M>
std::string_view name_in(KeyTable table) {
  for (const auto& k : table)
    if (k.is<M>()) return k.name;
  return {};
}

namespace key_spec_detail {
template <class>
struct member_of;
template <class C, class T>
struct member_of<T C::*> {
  using owner = C;
  using type = T;
};
template <auto M>
using owner_t = typename member_of<decltype(M)>::owner;
template <auto M>
using value_t = typename member_of<decltype(M)>::type;

template <auto M>
std::int64_t get(const void* section) {
  return static_cast<std::int64_t>(static_cast<const owner_t<M>*>(section)->*M);
}
template <auto M>
void set(void* section, std::int64_t value) {
  static_cast<owner_t<M>*>(section)->*M = static_cast<value_t<M>>(value);
}
template <auto M, KeyType T>
constexpr KeySpec row(std::string_view name, std::string_view doc) {
  KeySpec k;
  k.name = name;
  k.type = T;
  k.doc = doc;
  k.ref = &key_spec_ref<M>;
  if constexpr (T == KeyType::integer || T == KeyType::choice) {
    k.get = &get<M>;
    k.set = &set<M>;
  }
  return k;
}
}  // namespace key_spec_detail

template <auto M>
void* key_spec_ref(void* section) {
  return &(static_cast<key_spec_detail::owner_t<M>*>(section)->*M);
}

template <auto M>
constexpr KeySpec string_key(std::string_view name, std::string_view doc) {
  static_assert(std::is_same_v<key_spec_detail::value_t<M>, std::string>);
  return key_spec_detail::row<M, KeyType::string>(name, doc);
}
template <auto M>
constexpr KeySpec bool_key(std::string_view name, std::string_view doc) {
  static_assert(std::is_same_v<key_spec_detail::value_t<M>, bool>);
  return key_spec_detail::row<M, KeyType::boolean>(name, doc);
}
template <auto M>
constexpr KeySpec strings_key(std::string_view name, std::string_view doc) {
  static_assert(std::is_same_v<key_spec_detail::value_t<M>, std::vector<std::string>>);
  return key_spec_detail::row<M, KeyType::strings>(name, doc);
}
template <auto M>
constexpr KeySpec integer_key(std::string_view name, std::int64_t min, std::int64_t max, std::string_view doc) {
  static_assert(std::is_integral_v<key_spec_detail::value_t<M>>);
  KeySpec k = key_spec_detail::row<M, KeyType::integer>(name, doc);
  k.min = min;
  k.max = max;
  return k;
}
template <auto M>
constexpr KeySpec duration_key(std::string_view name, bool zero_allowed, std::string_view doc) {
  static_assert(std::is_same_v<key_spec_detail::value_t<M>, Duration>);
  KeySpec k = key_spec_detail::row<M, KeyType::duration>(name, doc);
  k.zero_allowed = zero_allowed;
  return k;
}
template <auto M>
constexpr KeySpec size_key(std::string_view name, std::uint64_t min, std::uint64_t max, std::string_view doc) {
  static_assert(std::is_same_v<key_spec_detail::value_t<M>, std::uint64_t>);
  KeySpec k = key_spec_detail::row<M, KeyType::size>(name, doc);
  k.size_min = min;
  k.size_max = max;
  return k;
}
template <auto M>
constexpr KeySpec number_key(std::string_view name, double min, double max, std::string_view doc) {
  static_assert(std::is_same_v<key_spec_detail::value_t<M>, double>);
  KeySpec k = key_spec_detail::row<M, KeyType::number>(name, doc);
  k.number_min = min;
  k.number_max = max;
  return k;
}
// An enum member, its words from Words<E>.
template <auto M>
constexpr KeySpec choice_key(std::string_view name, std::string_view kind, std::string_view doc) {
  using E = key_spec_detail::value_t<M>;
  static_assert(std::is_enum_v<E>);
  KeySpec k = key_spec_detail::row<M, KeyType::choice>(name, doc);
  k.words = Words<E>::words;
  k.kind = kind;
  return k;
}
// A bool member chosen by one of two words: words[0] = false, words[1] = true.
template <auto M>
constexpr KeySpec choice_key(std::string_view name, std::string_view kind,
                             std::span<const std::string_view> words, std::string_view doc) {
  static_assert(std::is_same_v<key_spec_detail::value_t<M>, bool>);
  KeySpec k = key_spec_detail::row<M, KeyType::choice>(name, doc);
  k.words = words;
  k.kind = kind;
  return k;
}
// A key with its own grammar, bound to the member `M` it fills: `parse` reads it (nullptr: its
// section's reader does, a sub-table mostly), `format` prints its effective value (nullptr: not
// recorded for `check --diff`).
template <auto M>
constexpr KeySpec custom_key(std::string_view name,
                             void (*parse)(Reader&, const toml::node&, const std::string&, void*),
                             std::string (*format)(const void*), std::string_view doc) {
  KeySpec k;
  k.name = name;
  k.doc = doc;
  k.ref = &key_spec_ref<M>;
  k.parse = parse;
  k.format = format;
  return k;
}

// Every table, by the path its keys live under ("server", "upstreams.NAME.retry"): what
// docs/configuration.md's key tables are generated from.
struct SectionSpec {
  std::string path;
  KeyTable keys;
  const void* defaults;  // a default-constructed section object, for the default column
  bool array = false;    // an array of tables ([[route]])
};
std::vector<SectionSpec> all_sections();

// What `check --diff` shows of a route on the route's own line: whether `key` (a route key's
// name) is part of it (its match, upstream and admission), and the admission part: " (deny
// 10.0.0.0/8, rate 100/1000ms burst 200 key client_ip)", or "" without any.
bool in_route_summary(std::string_view key);
std::string admission_text(const RouteConfig& route);

// A key's effective value in `object` (a section struct), as written in TOML.
std::string value_text(const KeySpec& key, const void* object);

// docs/configuration.md's key table of one section, from its rows (tests/config/
// key_reference_test.cpp keeps the committed page equal to it).
std::string key_table_markdown(const SectionSpec& section);
// Every section's table under its heading.
std::string key_reference_markdown();

}  // namespace sluice::config
