#ifndef UPDRAFT_IMAGE_IO_H
#define UPDRAFT_IMAGE_IO_H
// Image decoding through libpng and libjpeg. Their errors unwind with longjmp, which Swift cannot
// catch, so they are contained here and returned as messages.
#endif
