// test_http.h — a minimal blocking HTTP/1.0 GET for tests (no dependency).
//
// Contract: test code only.  HttpGet("127.0.0.1", port, "/metrics") connects
// over IPv4, sends one GET, reads until the peer closes (HTTP/1.0, so no
// chunking), and returns {status code, body}; status -1 when the connection
// fails or the answer is not HTTP.  `timeout_ms` bounds connect and every
// read.
#ifndef FLOWCLASS_SERVER_METRICS_TEST_HTTP_H_
#define FLOWCLASS_SERVER_METRICS_TEST_HTTP_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>

namespace flowclass {

struct HttpResponse {
  int status = -1;
  std::string body;
};

inline HttpResponse HttpGet(const std::string& ip, int port, const std::string& path,
                            int timeout_ms = 5000) {
  HttpResponse r;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return r;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return r;
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + ip + "\r\n\r\n";
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return r;
  }
  std::string all;
  char buf[65536];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t sp = all.find(' ');
  const size_t end = all.find("\r\n\r\n");
  if (all.rfind("HTTP/", 0) != 0 || sp == std::string::npos || end == std::string::npos)
    return r;
  r.status = std::atoi(all.c_str() + sp + 1);
  r.body = all.substr(end + 4);
  return r;
}

// Percent-encodes a query parameter value.
inline std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_METRICS_TEST_HTTP_H_
