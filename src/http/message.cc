#include "http/message.h"

#include <nlohmann/json.hpp>

namespace onebit {
namespace {

bool is_tchar(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (std::isalnum(u)) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits a head into lines, accepting CRLF and bare LF endings.
std::vector<std::string_view> head_lines(std::string_view head) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    head.remove_prefix(nl + 1);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

int parse_version(std::string_view v) {
  if (v.size() != 8 || v.substr(0, 7) != "HTTP/1." || !std::isdigit(static_cast<unsigned char>(v[7])))
    throw HttpError(400, "bad HTTP version");
  return v[7] - '0';
}

Headers parse_headers(const std::vector<std::string_view>& lines) {
  Headers headers;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') throw HttpError(400, "obsolete header folding");
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) throw HttpError(400, "malformed header line");
    std::string_view name = line.substr(0, colon);
    for (char c : name)
      if (!is_tchar(c)) throw HttpError(400, "bad character in header name");
    std::string_view value = trim(line.substr(colon + 1));
    for (char c : value)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
        throw HttpError(400, "control character in header value");
    if (headers.size() >= kMaxHeaders) throw HttpError(431, "too many header fields");
    headers.push_back({std::string(name), std::string(value)});
  }
  return headers;
}

// A Content-Length value: digits only, and repeated values must agree.
bool content_length(const Headers& headers, uint64_t& out) {
  bool found = false;
  for (const auto& h : headers) {
    if (!iequals(h.name, "Content-Length")) continue;
    if (h.value.empty() || h.value.size() > 18) throw HttpError(400, "bad Content-Length");
    uint64_t v = 0;
    for (char c : h.value) {
      if (!std::isdigit(static_cast<unsigned char>(c))) throw HttpError(400, "bad Content-Length");
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (found && v != out) throw HttpError(400, "conflicting Content-Length values");
    out = v;
    found = true;
  }
  return found;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

const std::string* find_header(const Headers& headers, std::string_view name) {
  for (const auto& h : headers)
    if (iequals(h.name, name)) return &h.value;
  return nullptr;
}

bool header_has_token(const Headers& headers, std::string_view name, std::string_view token) {
  for (const auto& h : headers) {
    if (!iequals(h.name, name)) continue;
    std::string_view v = h.value;
    while (!v.empty()) {
      size_t comma = v.find(',');
      if (iequals(trim(v.substr(0, comma)), token)) return true;
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return false;
}

std::string RequestHead::path() const { return target.substr(0, target.find('?')); }

size_t find_head_end(std::string_view buf) {
  // Leading empty lines before a request line are allowed and ignored (RFC 9112 2.2).
  size_t limit = std::min(buf.size(), kMaxHeadBytes);
  for (size_t i = 0; i < limit; ++i) {
    if (buf[i] != '\n') continue;
    if (i >= 1 && buf[i - 1] == '\n') return i + 1;
    if (i >= 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n') return i + 1;
  }
  if (buf.size() >= kMaxHeadBytes) throw HttpError(431, "request head larger than 64 KiB");
  return 0;
}

RequestHead parse_request_head(std::string_view head) {
  while (!head.empty() && (head.front() == '\r' || head.front() == '\n')) head.remove_prefix(1);
  auto lines = head_lines(head);
  if (lines.empty()) throw HttpError(400, "empty request");
  std::string_view line = lines[0];
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    throw HttpError(400, "malformed request line");
  RequestHead r;
  r.method = line.substr(0, sp1);
  r.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  r.minor = parse_version(line.substr(sp2 + 1));
  if (r.method.empty()) throw HttpError(400, "empty method");
  for (char c : r.method)
    if (!is_tchar(c)) throw HttpError(400, "bad character in method");
  if (r.target.empty() || r.target[0] != '/') throw HttpError(400, "request target must be an absolute path");
  for (char c : r.target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) throw HttpError(400, "bad character in request target");
  r.headers = parse_headers(lines);
  return r;
}

ResponseHead parse_response_head(std::string_view head) {
  auto lines = head_lines(head);
  if (lines.empty()) throw HttpError(502, "empty response head");
  std::string_view line = lines[0];
  if (line.size() < 12 || line[8] != ' ') throw HttpError(502, "malformed status line");
  ResponseHead r;
  r.minor = parse_version(line.substr(0, 8));
  std::string_view code = line.substr(9, 3);
  for (char c : code)
    if (!std::isdigit(static_cast<unsigned char>(c))) throw HttpError(502, "malformed status code");
  r.status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  if (line.size() > 12) {
    if (line[12] != ' ') throw HttpError(502, "malformed status line");
    r.reason = line.substr(13);
    // The reason is relayed to the client: no control byte may smuggle a header line through.
    for (char c : r.reason)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) throw HttpError(502, "control character in status line");
  }
  r.headers = parse_headers(lines);
  return r;
}

std::string serialize(const RequestHead& h) {
  std::string out = h.method + " " + h.target + " HTTP/1." + std::to_string(h.minor) + "\r\n";
  for (const auto& x : h.headers) out += x.name + ": " + x.value + "\r\n";
  return out + "\r\n";
}

std::string serialize(const ResponseHead& h) {
  std::string out = "HTTP/1." + std::to_string(h.minor) + " " + std::to_string(h.status) + " " +
                    (h.reason.empty() ? reason_phrase(h.status) : h.reason) + "\r\n";
  for (const auto& x : h.headers) out += x.name + ": " + x.value + "\r\n";
  return out + "\r\n";
}

BodyFraming request_framing(const RequestHead& head) {
  if (find_header(head.headers, "Transfer-Encoding") != nullptr) {
    // Only "chunked" alone is accepted: anything else could desynchronise the framing.
    const std::string* te = find_header(head.headers, "Transfer-Encoding");
    if (!iequals(trim(*te), "chunked")) throw HttpError(501, "unsupported Transfer-Encoding");
    if (find_header(head.headers, "Content-Length") != nullptr)
      throw HttpError(400, "both Transfer-Encoding and Content-Length");
    return {BodyKind::kChunked, 0};
  }
  uint64_t len = 0;
  if (content_length(head.headers, len) && len > 0) return {BodyKind::kLength, len};
  return {BodyKind::kNone, 0};
}

BodyFraming response_framing(const ResponseHead& head, std::string_view method) {
  if (method == "HEAD" || (head.status >= 100 && head.status < 200) || head.status == 204 || head.status == 304)
    return {BodyKind::kNone, 0};
  if (header_has_token(head.headers, "Transfer-Encoding", "chunked")) return {BodyKind::kChunked, 0};
  uint64_t len = 0;
  if (content_length(head.headers, len)) return len > 0 ? BodyFraming{BodyKind::kLength, len} : BodyFraming{};
  return {BodyKind::kUntilClose, 0};
}

size_t ChunkedDecoder::feed(const char* data, size_t size, std::string* out) {
  constexpr size_t kMaxLine = 4096;  // chunk extensions and trailer lines
  size_t i = 0;
  while (i < size && state_ != State::kDone) {
    char c = data[i];
    switch (state_) {
      case State::kSize: {
        int v = hex_value(c);
        if (v >= 0) {
          if (++size_digits_ > 15) throw HttpError(400, "chunk size too large");
          remaining_ = remaining_ * 16 + static_cast<uint64_t>(v);
          ++i;
        } else if (size_digits_ == 0) {
          throw HttpError(400, "malformed chunk size");
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::kExtension;
          line_bytes_ = 0;
          ++i;
        } else if (c == '\r') {
          state_ = State::kSizeLf;
          ++i;
        } else if (c == '\n') {
          state_ = State::kSizeLf;  // tolerate a bare LF: handled as if the CR came first
        } else {
          throw HttpError(400, "malformed chunk size");
        }
        break;
      }
      case State::kExtension:
        if (c == '\r') state_ = State::kSizeLf;
        else if (c == '\n') { state_ = State::kSizeLf; break; }
        else if (++line_bytes_ > kMaxLine) throw HttpError(400, "chunk extension too long");
        ++i;
        break;
      case State::kSizeLf:
        if (c != '\n') throw HttpError(400, "malformed chunk size line");
        ++i;
        size_digits_ = 0;
        state_ = remaining_ == 0 ? State::kTrailerStart : State::kData;
        break;
      case State::kData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, size - i));
        if (out != nullptr) out->append(data + i, n);
        payload_ += n;
        remaining_ -= n;
        i += n;
        if (remaining_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        if (c == '\r') { state_ = State::kDataLf; ++i; }
        else if (c == '\n') state_ = State::kDataLf;
        else throw HttpError(400, "chunk data not followed by CRLF");
        break;
      case State::kDataLf:
        if (c != '\n') throw HttpError(400, "chunk data not followed by CRLF");
        ++i;
        state_ = State::kSize;
        break;
      case State::kTrailerStart:
        if (c == '\r') { state_ = State::kTrailerLf; ++i; }
        else if (c == '\n') { state_ = State::kDone; ++i; }
        else { state_ = State::kTrailerLine; line_bytes_ = 0; }
        break;
      case State::kTrailerLine:
        if (c == '\n') state_ = State::kTrailerStart;
        else if (++line_bytes_ > kMaxLine) throw HttpError(400, "trailer line too long");
        ++i;
        break;
      case State::kTrailerLf:
        if (c != '\n') throw HttpError(400, "malformed chunked body end");
        ++i;
        state_ = State::kDone;
        break;
      case State::kDone:
        break;
    }
  }
  return i;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

std::string json_error_body(int status, const std::string& message, const std::string& type) {
  nlohmann::json j = {{"error", {{"code", status}, {"message", message}, {"type", type}}}};
  return j.dump();
}

std::string json_response(int status, const std::string& body, bool close, const Headers& extra) {
  ResponseHead h;
  h.status = status;
  h.headers = {{"Content-Type", "application/json; charset=utf-8"},
               {"Content-Length", std::to_string(body.size())}};
  if (close) h.headers.push_back({"Connection", "close"});
  h.headers.insert(h.headers.end(), extra.begin(), extra.end());
  return serialize(h) + body;
}

}  // namespace onebit
