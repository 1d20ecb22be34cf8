package pipeline_reconciler;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FSLinkResolver;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.local.LocalConfigKeys;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksums included), whose permissions are set and whose
 * symbolic links are read through java.nio instead of a `chmod` or `readlink` child
 * process: without Hadoop's native library, RawLocalFileSystem runs `chmod` for every
 * folder it makes and every file it creates, and `readlink` for every file a
 * FileContext renames (each of Delta's commits). Nothing else differs
 * (reconciler/engine/spark/local_fs.py says why).
 *
 * The class itself serves FileSystem (`fs.file.impl`); `Fs` serves FileContext
 * (`fs.AbstractFileSystem.file.impl`), which Hadoop's own LocalFs would otherwise serve
 * with a RawLocalFileSystem of its own.
 */
public final class ForklessLocalFileSystem extends LocalFileSystem {
  public ForklessLocalFileSystem() {
    super(new Raw());
  }

  /** Hadoop's LocalFs (checksums included) over `Raw`, for FileContext's `file:` paths. */
  public static final class Fs extends ChecksumFs {
    public Fs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(new RawFs(conf));
    }
  }

  /** Hadoop's RawLocalFs, delegating to `Raw` instead of a RawLocalFileSystem. */
  static final class RawFs extends DelegateToFileSystem {
    RawFs(Configuration conf) throws IOException, URISyntaxException {
      super(FsConstants.LOCAL_FS_URI, new Raw(), conf, FsConstants.LOCAL_FS_URI.getScheme(),
          false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;  // file:/// has no port
    }

    @Override
    public FsServerDefaults getServerDefaults(Path path) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String name) {
      return true;  // any local name, as RawLocalFs says
    }
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

    /**
     * Hadoop's own answer (RawLocalFileSystem's default way,
     * `deprecatedGetFileLinkStatusInternal`), with the link read in this process: the same
     * file named the same way (`new File(path.toString())`, so a `file:` URI names no link,
     * as with `readlink`), "" when it is not a link or cannot be read, as Hadoop's
     * FileUtil.readLink gives.
     */
    @Override
    public FileStatus getFileLinkStatus(Path path) throws IOException {
      String target = readLink(new File(path.toString()));
      FileStatus status;
      try {
        status = getFileStatus(path);
      } catch (FileNotFoundException missing) {
        if (target.isEmpty()) {
          throw missing;
        }
        return qualified(new FileStatus(0, false, 0, 0, 0, 0, FsPermission.getDefault(), "",
            "", new Path(target), path));  // a dangling link
      }
      if (target.isEmpty()) {
        return status;
      }
      return qualified(new FileStatus(status.getLen(), false, status.getReplication(),
          status.getBlockSize(), status.getModificationTime(), status.getAccessTime(),
          status.getPermission(), status.getOwner(), status.getGroup(), new Path(target),
          path));
    }

    private FileStatus qualified(FileStatus link) throws IOException {
      link.setSymlink(FSLinkResolver.qualifySymlinkTarget(getUri(), link.getPath(),
          link.getSymlink()));
      return link;
    }

    private static String readLink(File file) {
      try {
        return Files.readSymbolicLink(file.toPath()).toString();
      } catch (IOException | UnsupportedOperationException | InvalidPathException notLink) {
        return "";
      }
    }
  }
}
