#pragma once
// A one-line label that shows as much of its text as its width allows, eliding the middle, with
// the whole text as its tooltip. The status bar uses it: a long message (a path, an HDF5 error)
// would otherwise widen the window past the screen, and the status bar would cut it off unmarked.
// The whole message is also in the red banner, which wraps.
#include <algorithm>

#include <QLabel>
#include <QResizeEvent>

namespace gs::gui {

class ElidedLabel : public QLabel {
 public:
  explicit ElidedLabel(const QString& text = {}) {
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    setText(text);
  }
  // The whole text (QLabel's are hidden: the label shows an elided copy).
  void setText(const QString& text) {
    full_ = text;
    setToolTip(text);
    elide();
  }
  QString text() const { return full_; }

 protected:
  void resizeEvent(QResizeEvent* event) override {
    QLabel::resizeEvent(event);
    elide();
  }

 private:
  void elide() {
    const int room = std::max(0, contentsRect().width() - 2 * margin() - 2 * std::max(0, indent()));
    QLabel::setText(fontMetrics().elidedText(full_, Qt::ElideMiddle, room));
  }
  QString full_;
};

}  // namespace gs::gui
