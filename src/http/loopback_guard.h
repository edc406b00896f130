// What keeps a server on loopback private to this machine's programs: any web page the user opens
// can reach 127.0.0.1, by a name of its own that resolves there (DNS rebinding) or by a
// cross-site request. A request whose Host is not a loopback name or address, or whose Origin (a
// browser's, CORS preflights included) is not the server's own, is refused, unless the Origin is
// one the user allowed. Programs that are not browsers send no Origin and a loopback Host.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "http/message.h"

namespace onebit {

// "localhost", "*.localhost", 127.0.0.0/8 or [::1], with or without a port.
bool is_loopback_host(std::string_view host);

// Whether a listening address ("127.0.0.1", "localhost", "::1") is a loopback one.
bool is_loopback_address(const std::string& listen_host);

// Why `head` is refused, or "" when it may pass. An Origin is the server's own when its host is a
// loopback one and its port the Host header's; `allowed_origins` are exact origins
// ("http://localhost:3000") that may pass too.
std::string loopback_refusal(const RequestHead& head, const std::vector<std::string>& allowed_origins);

}  // namespace onebit
