"""The page cache, for the tests of cold reads: dropping a file from it."""
import os


def evict(path):
    """Drops the file from the page cache (written back first), as after a reboot."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
