package dev.ferrite.io;

/**
 * An operation on a device failed: the operating system returned an error, a transfer came up short,
 * or the device was closed or read-only. Names the device, the operation, the byte offset (or -1 when
 * the operation has none) and the errno with its text.
 */
public class DeviceException extends FerriteException {
    private final String device;
    private final String operation;
    private final long offset;
    private final int errno;

    public DeviceException(String device, String operation, long offset, int errno, String detail) {
        super(format(device, operation, offset, errno, detail));
        this.device = device;
        this.operation = operation;
        this.offset = offset;
        this.errno = errno;
    }

    /** The device's name (usually its path). */
    public String device() {
        return device;
    }

    /** The operation that failed: {@code open}, {@code read}, {@code write}, {@code flush}, ... */
    public String operation() {
        return operation;
    }

    /** Byte offset of the failed request on the device, or -1 when the operation has no offset. */
    public long offset() {
        return offset;
    }

    /** The errno value (see {@link Errno}); {@link Errno#EIO} for a short transfer. */
    public int errno() {
        return errno;
    }

    private static String format(String device, String operation, long offset, int errno, String detail) {
        StringBuilder sb = new StringBuilder(96).append(device).append(": ").append(operation);
        if (offset >= 0) {
            sb.append(" at offset ").append(offset);
        }
        sb.append(" failed: ").append(Errno.name(errno)).append(" (").append(Errno.describe(errno)).append(')');
        if (detail != null && !detail.isEmpty()) {
            sb.append(": ").append(detail);
        }
        return sb.toString();
    }
}
