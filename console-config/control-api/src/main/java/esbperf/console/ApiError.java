package esbperf.console;

/** An answer other than 200, with a message for the caller. */
final class ApiError extends Exception {
  final int status;

  ApiError(int status, String message) {
    super(message);
    this.status = status;
  }
}
