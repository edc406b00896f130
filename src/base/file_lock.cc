#include "base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace onebit {

FileLock::FileLock(const std::string& path, const std::function<void()>& waiting) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path + ": cannot open the lock file: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  int rc = -1;
  if (errno == EWOULDBLOCK) {
    if (waiting) waiting();
    do rc = ::flock(fd_, LOCK_EX);
    while (rc != 0 && errno == EINTR);
  }
  if (rc != 0) {
    int e = errno;
    ::close(fd_);
    throw Error(path + ": cannot lock: " + std::strerror(e));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace onebit
