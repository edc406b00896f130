// An exclusive advisory lock on a file (flock), held for the lifetime of the object: one bench
// at a time per lock file, so two benches on one machine never measure each other.
#pragma once

#include <functional>
#include <string>

namespace onebit {

class FileLock {
 public:
  // Takes the lock, calling `waiting` first if another process holds it. Throws Error when the
  // file cannot be opened.
  FileLock(const std::string& path, const std::function<void()>& waiting);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace onebit
