package pipeline_reconciler;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksums included), whose permissions are set through
 * java.nio instead of a `chmod` child process: without Hadoop's native library,
 * RawLocalFileSystem runs one for every folder it makes and every file it creates.
 * Nothing else differs (reconciler/engine/spark/local_fs.py says why).
 */
public final class ForklessLocalFileSystem extends LocalFileSystem {
  public ForklessLocalFileSystem() {
    super(new Raw());
  }

  /** RawLocalFileSystem with the same permission bits, set in this process. */
  public static final class Raw extends RawLocalFileSystem {
    /** The nine bits of a mode, from 0400 (owner read) down to 0001 (others execute). */
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
      PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE,
      PosixFilePermission.OTHERS_EXECUTE,
    };

    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      short mode = permission.toShort();
      if ((mode & ~0777) != 0) {  // a sticky bit: java.nio cannot set it, chmod can
        super.setPermission(path, permission);
        return;
      }
      Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
      for (int index = 0; index < BITS.length; index++) {
        if ((mode & (0400 >> index)) != 0) {
          bits.add(BITS[index]);
        }
      }
      try {
        Files.setPosixFilePermissions(pathToFile(path).toPath(), bits);
      } catch (UnsupportedOperationException notPosix) {  // e.g. Windows: Hadoop's own way
        super.setPermission(path, permission);
      }
    }
  }
}
