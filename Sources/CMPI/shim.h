// MPI from the distribution's Open MPI (pkg-config ompi-c adds the include and library paths).
// Open MPI spells its handles (MPI_COMM_WORLD, MPI_FLOAT, ...) as macros over addresses of globals,
// which Swift does not import: these accessors hand them over as values.
#include <mpi.h>

static inline MPI_Comm updraft_mpi_comm_world(void) { return MPI_COMM_WORLD; }
static inline MPI_Datatype updraft_mpi_float(void) { return MPI_FLOAT; }
static inline MPI_Datatype updraft_mpi_double(void) { return MPI_DOUBLE; }
static inline MPI_Datatype updraft_mpi_char(void) { return MPI_CHAR; }
static inline MPI_Errhandler updraft_mpi_errors_return(void) { return MPI_ERRORS_RETURN; }
static inline int updraft_mpi_thread_serialized(void) { return MPI_THREAD_SERIALIZED; }
static inline int updraft_mpi_max_error_string(void) { return MPI_MAX_ERROR_STRING; }
static inline int updraft_mpi_comm_type_shared(void) { return MPI_COMM_TYPE_SHARED; }
static inline MPI_Info updraft_mpi_info_null(void) { return MPI_INFO_NULL; }
static inline int updraft_mpi_max_processor_name(void) { return MPI_MAX_PROCESSOR_NAME; }
