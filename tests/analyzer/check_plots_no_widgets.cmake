# gs_analyzer_plots draws the report's charts off-screen, so it holds no interactive widget code of
# ours: no file dialog, menu, message box or tooltip, no handler of the mouse or of context-menu
# requests (gradscope-gui adds those, gui/src/plot_interaction.cpp), and it does not link the GUI.
# QCustomPlot is a QWidget, so Qt6::Widgets itself stays in its link interface.
# Run as: cmake -DNM=nm -DLIBRARY=libgs_analyzer_plots.a -DLINKS="a|b" -P check_plots_no_widgets.cmake
execute_process(COMMAND ${NM} -C ${LIBRARY} OUTPUT_VARIABLE symbols ERROR_VARIABLE errors
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${NM} -C ${LIBRARY} failed (${status}): ${errors}")
endif()
if(NOT symbols MATCHES "gs::analyzer::plots::setup_plot")
  message(FATAL_ERROR "${LIBRARY} defines no gs::analyzer::plots::setup_plot: not the plots library")
endif()

set(found "")
foreach(pattern QFileDialog QMenu QMessageBox QToolTip QInputDialog
                "QWidget::customContextMenuRequested" "QCustomPlot::mouse")
  string(REGEX MATCHALL "[^\n]*${pattern}[^\n]*" hits "${symbols}")
  list(APPEND found ${hits})
endforeach()
if(found)
  list(REMOVE_DUPLICATES found)
  list(JOIN found "\n  " lines)
  message(FATAL_ERROR "gs_analyzer_plots holds widget code; move it to gui/:\n  ${lines}")
endif()

string(REPLACE "|" ";" links "${LINKS}")
foreach(link IN LISTS links)
  if(link MATCHES "gui")
    message(FATAL_ERROR "gs_analyzer_plots links ${link}: the GUI uses the plots, not the other way")
  endif()
endforeach()
message(STATUS "gs_analyzer_plots: no widget code of ours; links ${LINKS}")
